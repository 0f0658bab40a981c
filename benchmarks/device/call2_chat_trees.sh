#!/usr/bin/env bash
# One-GPU call 2 (carry [".carry/b"], right after call 1 parked part a): install the embedded model;
# chat training data answered by the target (x2_chat_data.sh on GPU 0, /tmp/chat/chat_train.jsonl for
# call 3) and, beside it on the same GPU, held-out tau of the shipped draft per tree shape (bf16,
# greedy, captured rounds without compile: tau does not depend on it) at 2k/4k/8k code, prose, chat:
# what a drafted node buys, for the node budget.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PROMPTS=${PROMPTS:-640} GPUS=0 LIMIT=${CHAT_LIMIT:-330} bash benchmarks/device/x2_chat_data.sh > "$OUT/chat_data.log" 2>&1 &
mkdir -p "$OUT/trees"
for tree in ${TREES:-4-16-16-16-16 4-16-12 4-8-8-8-4 2-6-8-8-8 4-12 2-4-4-3-3 1-3-4-4-4 1-2-2-2-1 2-2-2-2}; do
  timeout ${TREE_LIMIT:-60} python benchmarks/tau_curve.py --out "$OUT/trees/$tree" --lengths 2048 4096 8000 \
    --kinds code prose chat --prompts 2 --new-tokens 128 --device cuda --dtype bfloat16 --no-compile \
    --tree-widths ${tree//-/ } > "$OUT/trees/$tree.log" 2>&1
  python - "$OUT/trees/$tree/tau_curve.json" "$tree" <<'PY' || tail -2 "$OUT/trees/$tree.log"
import json, statistics, sys
r = json.load(open(sys.argv[1]))
taus = [run["tau"] for run in r["runs"]]
by = {}
for run in r["runs"]:
    by.setdefault(run["kind"], []).append(run["tau"])
print(sys.argv[2], "mean tau", round(statistics.mean(taus), 3), {k: round(statistics.mean(v), 2) for k, v in by.items()})
PY
done
wait
tail -3 "$OUT/chat_data.log"
