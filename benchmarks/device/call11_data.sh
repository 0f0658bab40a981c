#!/usr/bin/env bash
# One-GPU call (eleventh session; carry [".carry/b", ".carry/ust"] right after a call that parked part a).
# Two jobs side by side on the GPU (each leaves it idle between small kernels):
# 1. the shipped draft's kind of training data, again: the target continues or answers prompts over
#    train-split documents (make_chat_data.py, LongSpec, the sixth session's settings, new seed),
#    --no-compile: in the tenth session compiling each new batch shape took the whole 110 s budget
#    (64 records). The records stay in /tmp/call10/chat_train.jsonl for call10_finetune.sh on this
#    warm machine, and come back gzipped with the log, so later sessions carry them in .carry/chat;
# 2. float32 exactness of a greedy batch against vanilla on the GPU (batch_exactness.py: batch 8, rows
#    of 8000, 6000, 4096 and 2048 tokens left-padded, real eos, the default and the tree alone).
set -u
START=$SECONDS
W=/tmp/call10
mkdir -p $W
source benchmarks/device/setup_model.sh
[ -f .carry/ust/ust.tgz ] || { echo "carry .carry/ust (ust.tgz)"; exit 3; }
tar xzf .carry/ust/ust.tgz -C $W
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_LONGSPEC_USR_SHARE=$W/usr_share_train
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
echo "setup $((SECONDS - START)) s"

timeout -k 10 "${CHAT_LIMIT:-380}" python benchmarks/make_chat_data.py --out $W/chat_train.jsonl \
  --num-prompts "${PROMPTS:-1800}" --document-tokens 1792 --max-new-tokens 256 --batch-size 16 --draft embedded \
  --continuation-share 0.7 --seed "${SEED:-30}" --sources prose docs man code multilingual pylib \
  --no-compile --time-budget "${CHAT_BUDGET:-330}" > $W/chat_data.log 2>&1 &
chat=$!

timeout -k 10 "${EXACT_LIMIT:-300}" python benchmarks/batch_exactness.py --out $W/exact > $W/batch_exactness.log 2>&1
echo "batch exactness exit $? after $((SECONDS - START)) s"
grep -v -i "warn\|Loading weights\|de-quantizing" $W/batch_exactness.log | tail -6
cp $W/batch_exactness.log "$OUT/"; cp $W/exact/batch_exactness.json "$OUT/" 2>/dev/null

wait $chat
echo "chat data exit $? after $((SECONDS - START)) s: $(wc -l < $W/chat_train.jsonl) records"
grep -E "answered|budget|prompts \(" $W/chat_data.log | tail -40
gzip -c $W/chat_train.jsonl > "$OUT/chat_train_call11.jsonl.gz"
cp $W/chat_data.log "$OUT/"; cp $W/chat_train.jsonl.summary.json "$OUT/chat_data.summary.json" 2>/dev/null
ls -la "$OUT"
echo "total $((SECONDS - START)) s"
