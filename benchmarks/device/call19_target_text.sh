#!/usr/bin/env bash
# One-GPU call (planned in the nineteenth session; issue 12; carry [".carry/b"] right after the calls that
# parked part a and unpacked .carry/ust into /tmp/call10): the target's own writing at scale.
#
# Why: every long run read its 60M tokens of human text five to six times, and the draft agrees with the
# target less on what the target writes than on human text, while tau is measured on the former. The
# largest set of target writing so far was 0.7M answer tokens in 336 s (fourteenth session). Here
# benchmarks/make_target_text.py continues the training loader's own 2048-token chunks (train split) in
# batches of BATCH through vanilla generate with the static cache (one shape: one compile expected), stopped by
# --time-budget. The records stay in /tmp/call10/target_text.jsonl for call10_finetune.sh on this warm
# machine (VARIANTS with chat_data:["/tmp/call10/target_text.jsonl"]); the summary and the log come back,
# and the records too when they are small (under 50 MB before gzip).
set -u
START=$SECONDS
source benchmarks/device/train_text_env.sh
echo "setup $((SECONDS - START)) s"

BUDGET=${TEXT_BUDGET:-300}   # answering; loading and tokenizing (80 s in the eighteenth session's first call) and a compile come first
timeout -k 10 $((BUDGET + 200)) python benchmarks/make_target_text.py --out $W/target_text.jsonl \
  --max-tokens "${MAX_TOKENS:-60000000}" --prompt-tokens 2048 --new-tokens "${NEW_TOKENS:-512}" \
  --batch-size "${BATCH:-256}" --seed "${SEED:-19}" --data-cache /tmp/target_text_cache --time-budget "$BUDGET" \
  > $W/target_text.log 2>&1
echo "target text exit $? after $((SECONDS - START)) s"
grep -E "prompts of|answered|budget|tokens_per_second|\"records\"|answer_tokens\"" $W/target_text.log | tail -8
cp $W/target_text.log "$OUT/"; cp $W/target_text.jsonl.summary.json "$OUT/target_text.summary.json" 2>/dev/null
# the records come back only when small (gzip of hundreds of MB would spend the call's time)
if [ "$(stat -c %s $W/target_text.jsonl 2>/dev/null || echo 0)" -lt 50000000 ]; then
  gzip -c $W/target_text.jsonl > "$OUT/target_text.jsonl.gz"
fi
nvidia-smi --query-gpu=memory.used --format=csv,noheader
echo "total $((SECONDS - START)) s"
