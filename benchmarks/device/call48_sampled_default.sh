#!/usr/bin/env bash
# The sampled default with its chain, as landed (forty-eighth session): the walk compiled whole beside the draft
# config's 32-token chain, which sampled calls now verify by default. One call, after parking a, a2..a5 (carry
# [".carry/b"]): the CUDA tests of sampling (the captured walk's law with a chain, compiled whole, among them), then
# decode_bench of the default against vanilla static sampled (compiled, same run; without the chain: call47 end).
set -u
START=$SECONDS
source benchmarks/device/setup_model.sh || exit $?
HF_LONGSPEC_TEST_DEVICE=cuda PYTHONPATH=/tmp/site:src timeout -k 5 260 python -m pytest -q -p no:logging \
  tests/test_sampled_accept.py tests/test_sampling.py > "$OUT/cuda_tests.log" 2>&1
tail -n 5 "$OUT/cuda_tests.log"
PYTHONPATH=/tmp/site:src timeout -k 5 $((500 - (SECONDS - START))) python benchmarks/decode_bench.py --out "$OUT/default" \
  --lengths 8000 --prompts 3 --repeats 1 --methods vanilla_static_sampled longspec_sampled \
  --fp32-prompts 0
echo "total $((SECONDS - START)) s"
