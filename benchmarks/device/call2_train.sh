#!/usr/bin/env bash
# GPU call 2: assemble the model; train the shipped SmolLM2 draft and the ablation.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
timeout 560 python benchmarks/train_smollm2_draft.py --out "$OUT" --budget-seconds "${BUDGET:-200}" --ablation-steps 200 --max-tokens 30000000 --work /tmp/train_work 2>&1 \
  | grep -v "it/s]" | tee "$OUT/train_log.txt" | tail -30
rm -rf /tmp/draft && cp -r "$OUT/draft" /tmp/draft

