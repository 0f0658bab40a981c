#!/usr/bin/env bash
# The fifty-second session's first call (no carry, no model): longspec_compile="auto"'s switch on a GPU, which the
# fifty-first session's call never reached (its random target ran too few rounds to lose a 0.5-s price): here the
# price is 0.001 s, so the first timed round pays it and the decoder compiles mid-call, warms up and is captured
# again; float32, both calls' tokens compared with vanilla greedy. Then gpu_round_check.py whole (the captured
# round's exactness on tiny random Llamas, float32 and bf16, chain and non-chain paths; call49 cut its tree half at
# 90 s), and again with the leaves re-ranked (the shipped config's tree). ~8 min on a cold machine.
set -u
START=$SECONDS
export PYTHONUNBUFFERED=1
TORCHINDUCTOR_CACHE_DIR=/tmp/ind_sw TRITON_CACHE_DIR=/tmp/ind_sw/triton PYTHONPATH=src timeout -k 5 200 \
  python benchmarks/compile_auto.py --out "$OUT/compile_auto_switch" --compile auto --price 0.001 --dtype float32 \
  --new-tokens 512 --calls 2 --check-exact 2>&1 | grep -v -i "warn" | tail -n 4
echo "switch done at $((SECONDS - START)) s"
PYTHONPATH=src timeout -k 5 ${ROUND_LIMIT:-200} python benchmarks/gpu_round_check.py > "$OUT/round_check.txt" 2>&1
echo "round check rc $? at $((SECONDS - START)) s"; tail -n 12 "$OUT/round_check.txt"
PYTHONPATH=src timeout -k 5 ${RERANK_LIMIT:-150} python benchmarks/gpu_round_check.py --rerank-leaves \
  > "$OUT/round_check_rerank.txt" 2>&1
echo "rerank round check rc $? at $((SECONDS - START)) s"; tail -n 14 "$OUT/round_check_rerank.txt"
echo "total $((SECONDS - START)) s"
