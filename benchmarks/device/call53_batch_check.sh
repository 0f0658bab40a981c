#!/usr/bin/env bash
# The fifty-third session's check (carry [".carry/b"], after parking a..a5): the GPU's float32 batch check under the
# machine's transformers 5.17 with the embedded tokenizer's pad token now set from the GGUF (8bf98b2), then the tests
# that only run on CUDA (the kernels compiled, the captured sampled walks) on session 52's refusals and fixes.
set -u
START=$SECONDS
source benchmarks/device/setup_model.sh || exit $?
PYTHONPATH=/tmp/site:src python -c "from hf_longspec.embedded import load_tokenizer; t = load_tokenizer(); \
print('tokenizer: bos', t.bos_token, 'eos', t.eos_token, 'pad', t.pad_token)" 2>&1 | tail -n 1
PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 timeout -k 5 "${LIMIT:-300}" python benchmarks/batch_exactness.py \
  --out "$OUT/exact" 2>&1 | grep -v -i "warn" | tail -n 12
echo "batch check done at $((SECONDS - START)) s"
PYTHONPATH=/tmp/site:src timeout -k 5 200 python -m pytest -q -p no:cacheprovider tests/test_fused_mask_attn.py \
  tests/test_sampled_accept.py 2>&1 | tail -n 4
echo "total $((SECONDS - START)) s"
