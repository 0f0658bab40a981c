#!/usr/bin/env bash
# The fifty-third session's call (no carry, no model): does a seeded sampled call repeat its tokens on CUDA, whether its
# rounds run cold (the first call warms up and captures), warm, or switch to compiled mid-call ("auto")? Vanilla static
# (compiled by transformers) beside it as the reference. SmolLM2's shape with random weights, float32, no top-k.
set -u
START=$SECONDS
run_seeded() {  # $1: compile choice, then compile_auto.py's arguments
  local name=$1; shift
  TORCHINDUCTOR_CACHE_DIR="/tmp/ind_$name" TRITON_CACHE_DIR="/tmp/ind_$name/triton" PYTHONPATH=src PYTHONUNBUFFERED=1 \
    timeout -k 5 "${LIMIT:-200}" python benchmarks/compile_auto.py --out "$OUT/seeded_$name" --compile "$name" \
    --seeded --top-k 0 --calls 3 --dtype float32 --prompt-tokens 2000 --new-tokens 128 "$@" 2>&1 \
    | grep -v -i "warn" | tail -n 4
  echo "$name done at $((SECONDS - START)) s"
}
run_seeded True
run_seeded vanilla
run_seeded False
run_seeded auto --price 0.001
echo "total $((SECONDS - START)) s"
