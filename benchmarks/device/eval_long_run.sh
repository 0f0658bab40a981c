#!/usr/bin/env bash
# One-GPU call (fifteenth session; issue 12), after x2_train_long.sh finished its run on the same warm
# machine: the long run's draft and the shipped draft measured side by side on the ablations' 36
# prompts (code, prose and chat at 2048 and 8000 tokens, suffix-aligned, 6 per cell, 96 new tokens,
# the tree alone), the prompts every fine-tune since the eleventh session was measured on, so the two
# pair prompt by prompt. Returns eval_shipped.json / eval_long.json (ablate_training --eval-only) and logs.
set -u
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# the same environment as the ablations' calls (call10_finetune.sh), where the shipped draft's 3.120
# on these prompts was measured
[ -d /tmp/call10/usr_share_train ] && export HF_LONGSPEC_USR_SHARE=/tmp/call10/usr_share_train
DRAFT=${DRAFT:-/tmp/x2_long/final}
for pair in "long=$DRAFT" shipped=embedded; do
  name=${pair%%=*}; draft=${pair#*=}
  timeout -k 10 "${EVAL_LIMIT:-120}" python benchmarks/ablate_training.py --out /tmp/eval_$name --eval-only \
    --init-draft "$draft" --eval-kinds code prose chat --eval-lengths 2048 8000 --eval-prompts 6 \
    --new-tokens 96 --lookup-tokens 0 > /tmp/eval_$name.log 2>&1
  echo "$name ($draft): exit $?"
  grep -v -i warn /tmp/eval_$name.log | grep -E "tau|^\|" | tail -12
  cp /tmp/eval_$name/ablation.json "$OUT/eval_$name.json"; cp /tmp/eval_$name.log "$OUT/"
done
