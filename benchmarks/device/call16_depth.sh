#!/usr/bin/env bash
# One-GPU call (sixteenth session; issue 12): does depth raise the draft's agreement with the target?
# feature_probe.py fine-tunes the shipped draft 800 steps (4 x 8192 tokens, lr 5e-4, the thirteenth
# session's recipe and mix) as it is ("plain"), with a second cross-attention + MLP block
# ("second_block") and with a whole second layer ("second_layer"), all from one seed's batches, and
# scores each teacher-forced on the ablation's 36 held-out prompts.
#
# After parking part a and unpacking .carry/ust into /tmp/call10 (device README), with carry
# [".carry/b"] on the first call:   SEED=0 bash benchmarks/device/call16_depth.sh
# and with no carry on the next, the machine warm:   SEED=1 bash benchmarks/device/call16_depth.sh
# The tokenized chunks stay in /tmp/fp_data_cache, so the second call does not tokenize again.
# EXTRA adds feature_probe options; from untrained drafts, both seeds in one call (sixteenth session):
#   SEED="0 1" ARMS="plain second_layer" EXTRA="--init-draft none --steps 700 --seq-len 2048 --batch-size 16 --lr 2e-3
#     --max-tokens 30000000" bash benchmarks/device/call16_depth.sh
# Width from the start (seventeenth session): ARMS="plain wide_mlp" with the same EXTRA; TAG names the
# output files when one call runs the script twice (e.g. EXTRA="... --wide-intermediate-size 3072" TAG=w3072).
set -u
START=$SECONDS
SEED=${SEED:-0}
ARMS=${ARMS:-plain second_block second_layer}
source benchmarks/device/train_text_env.sh
TAG=${TAG:-${SEED// /_}}
R=/tmp/fp$TAG
# shellcheck disable=SC2086  # SEED, ARMS and EXTRA are lists
timeout -k 10 "${LIMIT:-560}" python benchmarks/feature_probe.py --out $R --seeds $SEED --arms $ARMS \
  --data-cache /tmp/fp_data_cache ${EXTRA:-} > "$OUT/feature_probe_seed$TAG.log" 2>&1
status=$?
echo "feature_probe exit $status after $((SECONDS - START)) s"
grep -v "^{'loss'\|Writing model" "$OUT/feature_probe_seed$TAG.log" | tail -12
cp $R/feature_probe.json "$OUT/feature_probe_seed$TAG.json" 2>/dev/null
exit $status
