#!/usr/bin/env bash
# One-GPU call 2 (carry [".carry/b"], right after call 1): install the embedded model; the end-to-end
# decode benchmark (LongSpec vs vanilla static, 4k and 8k code and prose, float32 exactness on one
# prompt); then the batch benchmark at 8k, batch 1 and 16 (default tree: 16 rows are capped to 32 nodes;
# PROMPTS / REPEATS for the decode run (3 / 2), BATCHES="4 8" for other sizes, SKIP_DECODE=1 to run the batch benchmark alone, SKIP_BATCH=1 the decode one).
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
[ -n "${SKIP_DECODE:-}" ] || timeout ${DECODE_LIMIT:-330} python benchmarks/decode_bench.py --out "$OUT/decode" --lengths 4096 8000 --prompts ${PROMPTS:-3} \
  --repeats ${REPEATS:-2} --methods vanilla_static longspec --fp32-prompts 1 > "$OUT/decode.log" 2>&1
[ -n "${SKIP_DECODE:-}" ] || grep -v -i warn "$OUT/decode.log" | grep "^|\|float32 exact\|diverged\|first calls" | tail -12
[ -n "${SKIP_BATCH:-}" ] && exit 0
timeout ${BATCH_LIMIT:-230} python benchmarks/batch_bench.py --out "$OUT/batch" --batch-sizes ${BATCHES:-1 16} --lengths 8000 \
  > "$OUT/batch.log" 2>&1
grep "^|" "$OUT/batch.log" || tail -5 "$OUT/batch.log"
