#!/usr/bin/env bash
# Where a first call's time goes (the forty-eighth session: a sampled call's first call took 83 s on an H100 against
# vanilla static's 29 s): each round's parts timed on their first call (their compile), one fresh process per round
# so that neither finds the other's compiled code. No carry, no model (random weights of SmolLM2's shape); ~4 min.
set -u
START=$SECONDS
for variant in "greedy (tree + 32-token chain)" "sampled (tree + 32-token chain), walk compiled whole"; do
  name=$(echo "$variant" | cut -d' ' -f1)
  PYTHONPATH=src timeout -k 5 270 python benchmarks/sampled_round_cost.py --out "$OUT/first_call_$name" --length 8000 \
    --repeats 20 --variants "$variant" 2>&1 | grep -v -i "warn" | tail -n 3
done
echo "total $((SECONDS - START)) s"
