#!/usr/bin/env bash
# x2 call 3 (no carry, same warm machine after x2_train.sh installed the embedded model in /tmp/site):
# GPU 0: the SmolLM2 batch benchmark at 8k, batch 1/4/8 with the default tree, then batch 16 with the
#        default (batch-capped: 512 // 16 = 32 nodes) and with the full 68-node tree;
# GPU 1: the 8B-shape round vs the compiled vanilla step at 32k, batch 8 and 16 (one vanilla repeat:
#        at this batch each call is mostly its prefill).
# Every script writes its rows as it goes, so a cut-off run keeps what it measured.
set -u
[ -d /tmp/site ] || source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
(
  CUDA_VISIBLE_DEVICES=0 timeout 330 python benchmarks/batch_bench.py --out "$OUT/batch_8000" \
    --batch-sizes 1 4 8 --lengths 8000 > "$OUT/batch_8000.log" 2>&1
  CUDA_VISIBLE_DEVICES=0 timeout 230 python benchmarks/batch_bench.py --out "$OUT/batch_8000_b16" \
    --batch-sizes 16 --lengths 8000 --max-nodes 0 68 > "$OUT/batch_8000_b16.log" 2>&1
) &
CUDA_VISIBLE_DEVICES=1 timeout 570 python benchmarks/scale_study.py --out "$OUT/scale_batch" --contexts 32768 \
  --vanilla-contexts 32768 --batch-sizes 8 16 --vanilla-repeats 1 > "$OUT/scale_batch.log" 2>&1 &
wait
grep -v -i warn "$OUT"/batch_8000*.log "$OUT/scale_batch.log" | grep "|\|{\|rror" | tail -30
