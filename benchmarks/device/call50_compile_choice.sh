#!/usr/bin/env bash
# What compiling buys a greedy call (fiftieth session): the round compiled (the default on CUDA), captured uncompiled
# (longspec_compile=False), and with its drafting compiled alone (verification eager), each in a fresh process with
# fresh inductor and Triton cache folders: the first call's time against the replayed round's. No carry, no model
# (random weights of SmolLM2's shape, the shipped draft's config). Then the verification's first call compiled whole
# and with the target's MLP and RMSNorm classes nested compile regions (docs/results/session50_2026-12-06/
# verify_regions.py), each with fresh cache folders; ~5 min.
set -u
START=$SECONDS
run_variant() {  # $1: output name, $2: variant
  TORCHINDUCTOR_CACHE_DIR="/tmp/inductor_$1" TRITON_CACHE_DIR="/tmp/inductor_$1/triton" PYTHONPATH=src \
    timeout -k 5 200 python benchmarks/sampled_round_cost.py --out "$OUT/compile_choice_$1" --length 8000 \
    --repeats 50 --variants "$2" 2>&1 | grep -v -i "warn" | tail -n 1
}
run_variant uncompiled "greedy (tree + 32-token chain), uncompiled"
run_variant drafting_compiled "greedy (tree + 32-token chain), drafting compiled, verification eager"
run_variant compiled "greedy (tree + 32-token chain)"
for mode in whole mlp_norm; do
  TORCHINDUCTOR_CACHE_DIR="/tmp/inductor_verify_$mode" TRITON_CACHE_DIR="/tmp/inductor_verify_$mode/triton" \
    PYTHONPATH=src timeout -k 5 150 python docs/results/session50_2026-12-06/verify_regions.py $mode cuda 2>&1 \
    | grep "^verify\|Error" | tail -n 2 | tee -a "$OUT/verify_regions.txt"
done
echo "total $((SECONDS - START)) s"
