#!/usr/bin/env bash
# One-GPU call (carry [".carry/b", ".carry/candidate"], right after a call that parked part a): install
# the embedded model; held-out tau of the ladder's trees (tau_trees.sh); then the chat-tuned candidate
# draft (.carry/candidate/final_bf16, ignored by git) against the shipped one, bf16, same prompts:
# 2k/4k/8k code, prose, chat (multilingual where the machine has the text), 3 prompts each.
# CANDIDATE=/tmp/x2_long/final_bf16 SKIP_TREES=1 (no carry, right after call3_train_chat.sh on the same
# warm machine): the draft that call just trained instead.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
[ -n "${SKIP_TREES:-}" ] || bash benchmarks/device/tau_trees.sh
mkdir -p "$OUT/eval"
# SKIP_SHIPPED=1: the candidate only (the shipped draft's numbers on these prompts are already known)
shipped=embedded; [ -z "${SKIP_SHIPPED:-}" ] || shipped=""
for draft in $shipped ${CANDIDATE:-.carry/candidate/final_bf16}; do
  name=$(basename "$draft")
  timeout ${EVAL_LIMIT:-150} python benchmarks/tau_curve.py --out "$OUT/eval/$name" --draft "$draft" \
    --lengths 2048 4096 8000 --kinds code prose chat multilingual --prompts 3 --new-tokens 128 --device cuda \
    --dtype bfloat16 --no-compile > "$OUT/eval/$name.log" 2>&1
  python benchmarks/device/tau_summary.py "$OUT/eval/$name/tau_curve.json" "$name" || tail -3 "$OUT/eval/$name.log"
done
