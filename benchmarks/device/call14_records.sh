#!/usr/bin/env bash
# One-GPU call (fourteenth session; issue 12; carry [".carry/b"] right after the calls that parked part a
# and unpacked .carry/ust into /tmp/call10): the target's own writing after long train-split documents.
#
# Why: on prose the draft agrees with the target far less on what the target writes after a long
# prompt (top-1 0.44-0.50) than on the prompt's own text (0.75-0.82, thirteenth session), and tau is
# measured on the former. The shipped draft's records hold 1792-token documents; these hold 1800,
# 3500 and 7000, so the target's answers are written after 2k-8k of context, as the eval's are.
# Three make_chat_data.py processes side by side (each leaves the GPU idle between small kernels), one
# per document length, LongSpec (lossless: the same answers, faster), --no-compile, each stopped by
# --time-budget. The records stay in /tmp/call10/chat_long.jsonl for call10_finetune.sh on this warm
# machine and come back gzipped, one file per length (a call returns files of at most 16 MiB).
set -u
START=$SECONDS
source benchmarks/device/train_text_env.sh
echo "setup $((SECONDS - START)) s"

BUDGET=${RECORD_BUDGET:-300}
pids=()
for spec in 7000:400:41 3500:700:42 1800:1000:43; do   # document tokens : prompts drawn : seed
  IFS=: read -r doc prompts seed <<< "$spec"
  timeout -k 10 $((BUDGET + 120)) python benchmarks/make_chat_data.py --out $W/long_$doc.jsonl \
    --num-prompts "$prompts" --document-tokens "$doc" --max-new-tokens "${NEW_TOKENS:-512}" --batch-size 16 \
    --draft embedded --continuation-share 0.6 --seed "$seed" --sources code pylib prose docs man \
    --no-compile --time-budget "$BUDGET" > $W/long_$doc.log 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; echo "exit $? after $((SECONDS - START)) s"; done
for doc in 7000 3500 1800; do
  echo "== $doc: $(wc -l < $W/long_$doc.jsonl 2>/dev/null) records"
  grep -E "answered|budget|prompts \(" $W/long_$doc.log | tail -3
  gzip -c $W/long_$doc.jsonl > "$OUT/long_$doc.jsonl.gz"
  cp $W/long_$doc.log "$OUT/"; cp $W/long_$doc.jsonl.summary.json "$OUT/long_$doc.summary.json" 2>/dev/null
done
cat $W/long_7000.jsonl $W/long_3500.jsonl $W/long_1800.jsonl > $W/chat_long.jsonl
echo "records: $(wc -l < $W/chat_long.jsonl)"
ls -la "$OUT"
echo "total $((SECONDS - START)) s"
