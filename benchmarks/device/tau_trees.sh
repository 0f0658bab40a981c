#!/usr/bin/env bash
# Held-out tau of the shipped draft per tree shape (bf16, greedy, captured rounds without compile: tau
# does not depend on it) at 2k/4k/8k code, prose, chat, 2 prompts each: what a drafted node buys, for
# the node budget. TREES="2-6-8-8-7 ..." picks the shapes; needs the model installed (setup_model.sh).
set -u
mkdir -p "$OUT/trees"
for tree in ${TREES:-4-16-16-16-16 2-6-8-8-7 2-4-4-3-2 2-2-2-1}; do
  timeout ${TREE_LIMIT:-60} python benchmarks/tau_curve.py --out "$OUT/trees/$tree" --lengths 2048 4096 8000 \
    --kinds code prose chat --prompts 2 --new-tokens 128 --device cuda --dtype bfloat16 --no-compile \
    --tree-widths ${tree//-/ } > "$OUT/trees/$tree.log" 2>&1
  python benchmarks/device/tau_summary.py "$OUT/trees/$tree/tau_curve.json" "$tree" || tail -2 "$OUT/trees/$tree.log"
done
