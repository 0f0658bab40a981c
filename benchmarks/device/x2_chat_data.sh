#!/usr/bin/env bash
# x2 call (no carry, a warm machine with the embedded model in /tmp/site): chat training data answered by
# the target itself (issue 12), half the prompts on each GPU, 16 left-padded prompts per generate() call
# with the shipped draft (LongSpec batched decoding is lossless: the target's own greedy answers).
# Writes /tmp/chat/chat_train.jsonl for x2_train_long.sh (TRAIN_ARGS="--corpus-mix chat --chat-data
# /tmp/chat/chat_train.jsonl") and returns it gzipped with its summaries under $OUT/chat/: chat_train.jsonl.gz,
# the form .carry/chat holds, about 2.5 MB per 1000 records (estimated from 6 records made on the CPU), small
# enough to keep in the repository.
# CONT_SHARE=0.5: half the prompts are bare documents the target continues (task "continue");
# SEED_BASE=10: other documents and tasks than the 640 records of 2026-12-01 (seed 0).
# DOC_TOKENS: tokens of document per prompt (2048). SOURCES: corpus sources of the documents
# (make_chat_data.py's default: code pylib docs man changelog multilingual; "prose" adds package descriptions and licenses). LIMIT seconds per GPU; answering stops 45 s before it (--time-budget) and writes what it has.
set -u
[ -d /tmp/site ] || source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PROMPTS=${PROMPTS:-1000}   # per GPU
mkdir -p /tmp/chat "$OUT/chat"
GPUS=${GPUS:-0 1}          # GPUS=0 on the one-GPU kind
for gpu in $GPUS; do
  CUDA_VISIBLE_DEVICES=$gpu timeout ${LIMIT:-540} python benchmarks/make_chat_data.py --out /tmp/chat/part$gpu.jsonl \
    --num-prompts "$PROMPTS" --document-tokens ${DOC_TOKENS:-2048} --max-new-tokens 256 --batch-size 16 --seed $((${SEED_BASE:-0} + gpu)) \
    --continuation-share ${CONT_SHARE:-0} ${SOURCES:+--sources $SOURCES} --time-budget $(( ${LIMIT:-540} - 45 )) \
    --draft embedded > "$OUT/chat/part$gpu.log" 2>&1 &
done
wait
cat /tmp/chat/part*.jsonl > /tmp/chat/chat_train.jsonl 2>/dev/null
cp /tmp/chat/*.summary.json "$OUT/chat/" 2>/dev/null
gzip -c /tmp/chat/chat_train.jsonl > "$OUT/chat/chat_train.jsonl.gz"
wc -l /tmp/chat/chat_train.jsonl; tail -2 "$OUT"/chat/part*.log
