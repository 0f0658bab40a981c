#!/usr/bin/env bash
# longspec_compile="auto" (fifty-first session): a user's first three calls (4000-token prompt, 128 new tokens, bf16)
# with vanilla static (the baseline of record), LongSpec compiled (the default on CUDA), uncompiled, and "auto",
# each in a fresh process with fresh inductor and Triton cache folders (a cold machine). Then "auto" with its price
# of compiling set to 0.5 s, in float32: the switch comes in the middle of the first call (the round compiled and
# captured again) and every call's tokens are compared with vanilla greedy. No carry, no model (random weights of
# SmolLM2's shape, the shipped draft); ~5 min.
set -u
START=$SECONDS
run_choice() {  # $1: output name, then compile_auto.py's arguments
  local name=$1; shift
  TORCHINDUCTOR_CACHE_DIR="/tmp/inductor_$name" TRITON_CACHE_DIR="/tmp/inductor_$name/triton" PYTHONPATH=src \
    timeout -k 5 "${LIMIT:-150}" python benchmarks/compile_auto.py --out "$OUT/compile_auto_$name" "$@" 2>&1 \
    | grep -v -i "warn" | tail -n 4
}
run_choice vanilla --compile vanilla
run_choice compiled --compile True
run_choice uncompiled --compile False
run_choice auto --compile auto
LIMIT=240 run_choice auto_switch_fp32 --compile auto --price 0.5 --dtype float32 --new-tokens 512 --calls 2 --check-exact
echo "total $((SECONDS - START)) s"
