#!/usr/bin/env bash
# The greedy path at the code as landed since the forty-eighth session (the round calls greedy_accept and its commit
# directly again; sampled calls verify the chain): one call after parking a, a2..a5 (carry [".carry/b"]). The
# attention kernels' tests and the captured round's exactness on tiny random Llamas, the CUDA-only sampling tests,
# then the greedy default end to end against vanilla static (compiled, same run) at 8000 tokens.
set -u
START=$SECONDS
source benchmarks/device/setup_model.sh || exit $?
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1
timeout -k 5 150 python -m pytest -q -p no:cacheprovider -p no:logging tests/test_fused_mask_attn.py \
  tests/test_hybrid_attention.py > "$OUT/kernel_tests.txt" 2>&1; tail -n 2 "$OUT/kernel_tests.txt"
timeout -k 5 90 python benchmarks/gpu_round_check.py > "$OUT/round_check.txt" 2>&1; tail -n 6 "$OUT/round_check.txt"
timeout -k 5 $((560 - (SECONDS - START))) python benchmarks/decode_bench.py --out "$OUT/greedy" --lengths 8000 \
  --prompts 3 --repeats 1 --methods vanilla_static longspec --fp32-prompts 1
echo "total $((SECONDS - START)) s"
