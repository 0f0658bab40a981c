#!/usr/bin/env bash
# x2 call 2 (carry [".carry/b"], right after call 1): assemble the embedded model; the batch benchmark,
# 4k prompts on GPU 0 and 8k prompts on GPU 1 side by side (each run compares its own methods).
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
for gpu in 0 1; do
  length=$([ $gpu = 0 ] && echo 4096 || echo 8000)
  CUDA_VISIBLE_DEVICES=$gpu timeout 520 python benchmarks/batch_bench.py --out "$OUT/batch_$length" \
    --batch-sizes 1 4 8 16 --lengths $length > "$OUT/batch_$length.log" 2>&1 &
done
wait
grep -v -i warn "$OUT"/batch_*.log | grep "^|\|{" | tail -30
