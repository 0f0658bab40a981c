#!/usr/bin/env bash
# Where a first call's time goes (the forty-eighth session: a sampled call's first call took 83 s on an H100 against
# vanilla static's 29 s): each round's parts timed on their first call (their compile), one fresh process and one
# fresh cache folder (inductor's and Triton's) per round, so that neither finds the other's compiled code. The sampled
# round runs twice: the second process finds the first's compiled code in the on-disk caches (what a user's second
# run pays). No carry, no model (random weights of SmolLM2's shape); ~5 min.
set -u
START=$SECONDS
run_variant() {  # $1: output name, $2: variant, $3: inductor's cache folder (a fresh one: a cold start)
  TORCHINDUCTOR_CACHE_DIR="$3" TRITON_CACHE_DIR="$3/triton" PYTHONPATH=src timeout -k 5 270 \
    python benchmarks/sampled_round_cost.py --out "$OUT/first_call_$1" --length 8000 \
    --repeats 20 --variants "$2" 2>&1 | grep -v -i "warn" | tail -n 3
}
run_variant greedy "greedy (tree + 32-token chain)" /tmp/inductor_greedy
run_variant sampled "sampled (tree + 32-token chain), walk compiled whole" /tmp/inductor_sampled
run_variant sampled_disk_cache "sampled (tree + 32-token chain), walk compiled whole" /tmp/inductor_sampled
echo "total $((SECONDS - START)) s"
