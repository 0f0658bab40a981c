#!/usr/bin/env bash
# One-GPU call 3 (no carry, the machine of call 2 still warm): continue training the shipped draft on
# the wide mix with the target-answered chat data of call 2 (issue 12), BUDGET seconds on one GPU,
# the global batch of the shipped draft's run (16 x 2048); INIT=FOLDER starts from another draft.
# MIX: another --corpus-mix (preset or source=weight,...). EXTRA_ARGS: more train options
# (e.g. "--chat-windows end --corpus-max-epochs 2"). Returns $OUT/x2_long/final_bf16.tar.
# CHAT_GZ="FILE ...": records kept in the repository instead of call 2's, joined into one file in /tmp/chat
# (docs/results/session27_2026-12-03/chat_train.jsonl.gz: the 1800 records of the twenty-seventh session, seed 20;
# docs/results/session28_2026-12-04/chat_train.jsonl.gz: 1800 more, seed 30).
set -u
# shellcheck disable=SC2086  # CHAT_GZ is a list of paths
if [ -n "${CHAT_GZ:-}" ]; then mkdir -p /tmp/chat && gunzip -c $CHAT_GZ > /tmp/chat/chat_train.jsonl || exit 3; fi
[ -f /tmp/chat/chat_train.jsonl ] || { echo "no /tmp/chat/chat_train.jsonl: run call 2 first, or give CHAT_GZ"; exit 3; }
NPROC=1 BATCH=16 TOTAL_STEPS=${TOTAL_STEPS:-2600} BUDGET=${BUDGET:-330} \
  TRAIN_ARGS="--corpus-mix ${MIX:-chat} --chat-data /tmp/chat/chat_train.jsonl --init-draft ${INIT:-embedded} --lr 1e-3 --warmup-steps 50 ${EXTRA_ARGS:-}" \
  bash benchmarks/device/x2_train_long.sh
