#!/usr/bin/env bash
# One-GPU call (fortieth session; issue 12): a second stage of the shipped draft's last recipe, twice as long.
# The thirty-eighth session's stage (800 steps of 8192 x 4 tokens at lr 5e-4, reading the window of 2048, from the
# draft before it) gained +0.11 tau alone with its loss still falling; the draft alone is 0.03 short of 4.0 on the
# GPU. Here: 1600 steps of the same recipe from the shipped draft, seeds 0 and 1 trained side by side on the one GPU
# (a 135M target and a 4.9M draft leave it mostly idle; each run stops at max_seconds if sharing slows it), each
# measured against the start on the ablation's prompts (tree alone, code, prose and chat at 2048 and 8000, 6 each),
# then merged. Returns both drafts (bf16) and the merged report in one tarball plus the drafts' tars.
# After parking a, a2, a3, a4, ust1, ust2 and carrying b (device README), no carry:
#   bash benchmarks/device/call40_stage2.sh
set -u
START=$SECONDS
source benchmarks/device/train_text_env.sh
[ -s $W/chat_train.jsonl ] || gunzip -c docs/results/session28_2026-12-04/chat_train.jsonl.gz > $W/chat_train.jsonl
MIX=chat=0.35,code=0.2,prose=0.1,docs=0.1,man=0.1,multilingual=0.1,pylib=0.05  # the shipped draft's mix
STEPS=${STEPS:-1600}
VARIANT="stage2=seq_len:8192,batch_size:4,learning_rate:5e-4,max_seconds:${MAX_SECONDS:-400}"
D=/tmp/c40
mkdir -p $D
for seed in 0 1; do
  start=(); [ $seed = 0 ] && start=(--eval-start)
  timeout -k 10 $((${BUDGET:-560} - (SECONDS - START))) python benchmarks/ablate_training.py --out $D/seed$seed \
    --init-draft embedded "${start[@]}" --steps "$STEPS" --seeds $seed --seq-len 8192 --batch-size 4 --lr 5e-4 \
    --warmup-steps 50 --corpus-mix "$MIX" --corpus-max-epochs 2 --max-tokens 40000000 \
    --chat-data $W/chat_train.jsonl --eval-kinds code prose chat --eval-lengths 2048 8000 --eval-prompts 6 \
    --new-tokens 96 --lookup-tokens 0 --variant "$VARIANT" > $D/ablation_seed$seed.log 2>&1 &
done
wait
echo "ablations done after $((SECONDS - START)) s"
python benchmarks/ablate_training.py --out $D/merged --merge $D/seed0/ablation.json $D/seed1/ablation.json \
  > $D/merged.log 2>&1
grep -v -i warn $D/merged.log | tail -22
grep -h "train_runtime\|seed [01]: tau" $D/ablation_seed*.log
bash benchmarks/device/pack_drafts.sh $D/seed*/runs/*/final
tar czf "$OUT/call40.tgz" -C /tmp --exclude='runs' c40
ls -la "$OUT"
echo "total $((SECONDS - START)) s"
