#!/usr/bin/env bash
# One-GPU call (carry [".carry/b", ".carry/candidate"], right after a call that parked part a): install
# the embedded model; held-out tau of the ladder's trees (tau_trees.sh); then the chat-tuned candidate
# draft (.carry/candidate/final_bf16, ignored by git) against the shipped one, bf16, same prompts:
# 2k/4k/8k code, prose, chat (multilingual where the machine has the text), 3 prompts each.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
[ -n "${SKIP_TREES:-}" ] || bash benchmarks/device/tau_trees.sh
mkdir -p "$OUT/eval"
for draft in embedded .carry/candidate/final_bf16; do
  name=$(basename "$draft")
  timeout ${EVAL_LIMIT:-150} python benchmarks/tau_curve.py --out "$OUT/eval/$name" --draft "$draft" \
    --lengths 2048 4096 8000 --kinds code prose chat multilingual --prompts 3 --new-tokens 128 --device cuda \
    --dtype bfloat16 --no-compile > "$OUT/eval/$name.log" 2>&1
  python - "$OUT/eval/$name/tau_curve.json" "$name" <<'PY' || tail -3 "$OUT/eval/$name.log"
import json, statistics, sys
r = json.load(open(sys.argv[1]))
by = {}
for run in r["runs"]:
    by.setdefault(run["kind"], []).append(run["tau"])
print(sys.argv[2], "mean tau", round(statistics.mean(run["tau"] for run in r["runs"]), 3),
      {k: round(statistics.mean(v), 2) for k, v in by.items()}, "skipped", r.get("skipped_kinds"))
PY
done
