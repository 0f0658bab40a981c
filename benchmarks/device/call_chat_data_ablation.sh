#!/usr/bin/env bash
# One-GPU call (carry [".carry/chat", ".carry/usr_share_train"], a warm machine whose /tmp/site holds
# the model): two jobs that each leave the GPU idle between small kernels, side by side on it.
# 1. Self-distilled training data (issue 12): x2_chat_data.sh on GPU 0 (PROMPTS, CONT_SHARE, SEED_BASE,
#    LIMIT, DOC_TOKENS as there), then the records of .carry/chat appended: /tmp/chat/chat_train.jsonl.
# 2. The seeded training ablation (benchmarks/ablate_training.py; ABLATION_LIMIT seconds, ablation.json
#    rewritten after every run; ABLATION_STEPS; ABLATION_VARIANTS: the --variant options, default base,
#    rollout2 and seq4k) on the carried records, so that it needs nothing from job 1.
# Both read this machine's train-split man pages and non-English files from .carry/usr_share_train,
# copied to /tmp/usr_share_train for the training call after this one (HF_LONGSPEC_USR_SHARE).
set -u
[ -d /tmp/site ] || source benchmarks/device/setup_model.sh
[ -f .carry/usr_share_train/pack_manifest.json ] || { echo "carry .carry/usr_share_train"; exit 3; }
rm -rf /tmp/usr_share_train && cp -r .carry/usr_share_train /tmp/usr_share_train
[ -f .carry/chat/chat_train.jsonl.gz ] || { echo "carry .carry/chat (chat_train.jsonl.gz)"; exit 3; }
mkdir -p /tmp/chat_old   # the records made so far (3072 since the sixth session of 2026-12-01, 7.5 MB gzipped)
gunzip -c .carry/chat/chat_train.jsonl.gz > /tmp/chat_old/chat_train.jsonl
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_LONGSPEC_USR_SHARE=/tmp/usr_share_train

mkdir -p "$OUT/ablation"
ablation=""
if [ "${ABLATION_STEPS:-150}" != 0 ]; then   # ABLATION_STEPS=0: the data alone
  timeout ${ABLATION_LIMIT:-520} python benchmarks/ablate_training.py --out "$OUT/ablation" --init-draft embedded \
    --steps ${ABLATION_STEPS:-150} --seeds 0 1 --corpus-mix chat --chat-data /tmp/chat_old/chat_train.jsonl \
    --max-tokens 10000000 ${ABLATION_VARIANTS:---variant base --variant rollout2=rollout_steps:2 --variant seq4k=seq_len:4096,batch_size:8} \
    > "$OUT/ablation.log" 2>&1 &
  ablation=$!
fi

GPUS=0 bash benchmarks/device/x2_chat_data.sh
cat /tmp/chat_old/chat_train.jsonl >> /tmp/chat/chat_train.jsonl
echo "chat records in all: $(wc -l < /tmp/chat/chat_train.jsonl)"

[ -n "$ablation" ] || exit 0
wait $ablation; echo "ablation exit $?"
grep -E "seed [0-9]: tau|^\|" "$OUT/ablation.log" || tail -5 "$OUT/ablation.log"
rm -rf "$OUT/ablation/runs"   # the drafts themselves stay here; ablation.json has what was measured
