#!/usr/bin/env bash
# The fifty-second session's second call (no carry, no model): longspec_compile="auto"'s switch in bf16 (how long the
# round that compiles stalls a call, cold) and in a sampled call (do_sample with top_k=1, float32: the sampled
# round and its compiled walk swapped in mid-call; top_k=1 makes its tokens greedy's, compared with vanilla greedy).
# Each in a fresh process with fresh inductor and Triton cache folders; ~3 min.
set -u
START=$SECONDS
run_switch() {  # $1: output name, then compile_auto.py's arguments
  local name=$1; shift
  TORCHINDUCTOR_CACHE_DIR="/tmp/ind_$name" TRITON_CACHE_DIR="/tmp/ind_$name/triton" PYTHONPATH=src PYTHONUNBUFFERED=1 \
    timeout -k 5 "${LIMIT:-240}" python benchmarks/compile_auto.py --out "$OUT/compile_auto_$name" --compile auto \
    --price 0.001 --new-tokens 512 --calls 2 "$@" 2>&1 | grep -v -i "warn" | tail -n 3
  echo "$name done at $((SECONDS - START)) s"
}
run_switch switch_bf16 --dtype bfloat16
run_switch switch_sampled_fp32 --dtype float32 --top-k 1 --check-exact
echo "total $((SECONDS - START)) s"
