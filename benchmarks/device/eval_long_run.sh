#!/usr/bin/env bash
# One-GPU call (fifteenth session; issue 12), after x2_train_long.sh finished its run on the same warm
# machine: the long run's draft and the shipped draft measured side by side on the ablations' 36
# prompts (code, prose and chat at 2048 and 8000 tokens, suffix-aligned, 6 per cell, 96 new tokens,
# the tree alone), the prompts every fine-tune since the eleventh session was measured on, so the two
# pair prompt by prompt. Returns eval_shipped.json / eval_long.json (ablate_training --eval-only) and
# their logs (the long draft's log starts with the step its final/ was saved at); exits with the
# worst status of the two. SKIP_SHIPPED=1 (seventeenth session) measures the long draft alone.
set -u
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
# the same environment as the ablations' calls (call10_finetune.sh), where the shipped draft's 3.120
# on these prompts was measured
[ -d /tmp/call10/usr_share_train ] && export HF_LONGSPEC_USR_SHARE=/tmp/call10/usr_share_train
DRAFT=${DRAFT:-/tmp/x2_long/final}
[ -f "$DRAFT/config.json" ] || { echo "no draft in $DRAFT (x2_train_long.sh first, on this machine)"; exit 3; }
worst=0
# SKIP_SHIPPED=1 measures the long draft alone: the shipped draft's per-prompt tau on these prompts came out
# the same in the fourteenth and fifteenth sessions (docs/results/session15_2026-12-02/eval_shipped.json)
pairs=("long=$DRAFT"); [ "${SKIP_SHIPPED:-0}" = 1 ] || pairs+=(shipped=embedded)
for pair in "${pairs[@]}"; do
  name=${pair%%=*}; draft=${pair#*=}
  log=/tmp/eval_$name.log
  : > $log
  [ -f "$draft/training_speed.json" ] && python -c "import json,sys; print('draft saved at step', \
json.load(open(sys.argv[1]))['global_step'])" "$draft/training_speed.json" >> $log
  timeout -k 10 "${EVAL_LIMIT:-120}" python benchmarks/ablate_training.py --out /tmp/eval_$name --eval-only \
    --init-draft "$draft" --eval-kinds code prose chat --eval-lengths 2048 8000 --eval-prompts 6 \
    --new-tokens 96 --lookup-tokens 0 >> $log 2>&1
  status=$?
  echo "$name ($draft): exit $status"
  grep -v -i warn $log | grep -E "step|tau|^\|" | tail -12
  cp $log "$OUT/"
  if [ $status -eq 0 ]; then cp /tmp/eval_$name/ablation.json "$OUT/eval_$name.json"; else worst=$status; fi
done
exit $worst
