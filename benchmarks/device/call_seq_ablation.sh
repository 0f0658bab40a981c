#!/usr/bin/env bash
# One-GPU call: the whole-run sequence-length ablation (issue 12: does training on 4096-token
# sequences keep prose tau flat from 2k to 8k?). From an UNTRAINED draft, STEPS steps of each variant
#   base   2048 x 16
#   seq4k  4096 x 8    (the same 32768 tokens per step, so the same tokens in all)
# for every seed of SEEDS, on the data of the shipped draft's last stage (docs/training.md, "More
# target continuations, small sources read twice"): its corpus mix, --corpus-max-epochs 2,
# --max-tokens 40000000, the 3072 target-answered records of .carry/chat, the man pages and
# non-English text of .carry/usr_share_train (HF_LONGSPEC_USR_SHARE). LR/WARMUP: the first draft's
# from-scratch recipe (2e-3, 20 warm-up steps, cosine), not the 1e-3/50 of the later continuations.
# After each run, held-out tau (benchmarks/ablate_training.py: uncompiled rounds, the draft's tree
# alone) on code, prose and chat at 2048/4096/8000, 2 prompts each, 64 new tokens; ablation.json has
# tau per (kind, length) per run. seq4k's chunks are regrouped from base's (same tokens, no second
# tokenizing). Returns $OUT/seq_ablation/ablation.json and .png, $OUT/seq_ablation.log.
#
# Two seeds do not fit one call: one seed per call on one warm machine, then merge them here.
#   1. carry [".carry/a"]:  mkdir -p /tmp/m && cp .carry/a/* /tmp/m/         (parks part a of the model)
#   2. carry [".carry/b"]:  source benchmarks/device/setup_model.sh           (installs it in /tmp/site)
#   3. carry [".carry/chat", ".carry/usr_share_train"]:  SEEDS=0 bash benchmarks/device/call_seq_ablation.sh
#   4. no carry (the data stay in /tmp while the machine is warm):  SEEDS=1 bash benchmarks/device/call_seq_ablation.sh
#      (if the machine went cold: 1., 2., then 4. with the carry of 3.)
#   here: python benchmarks/ablate_training.py --out DIR \
#           --merge S0/seq_ablation/ablation.json S1/seq_ablation/ablation.json
# Keep STEPS, LR and WARMUP the same for both calls (--merge refuses other settings) and the code too.
set -u
START=$SECONDS
SEEDS=${SEEDS:-0}
STEPS=${STEPS:-1200}     # 2 x 1200 steps at ~8.7 steps/s is ~280 s of training; with data, tau and start ~420 s
LIMIT=${LIMIT:-530}      # seconds for the python run: the call's 600 s less the copies and the way back
[ -d /tmp/site ] || source benchmarks/device/setup_model.sh   # a fresh machine: part a parked, .carry/b carried
# the train-split pack and the chat records: carried with this call, or left in /tmp by the last one
if [ -f .carry/usr_share_train/pack_manifest.json ]; then
  rm -rf /tmp/usr_share_train && cp -r .carry/usr_share_train /tmp/usr_share_train
fi
[ -f /tmp/usr_share_train/pack_manifest.json ] || { echo "carry .carry/usr_share_train"; exit 3; }
if [ -f .carry/chat/chat_train.jsonl.gz ]; then
  mkdir -p /tmp/chat_old && gunzip -c .carry/chat/chat_train.jsonl.gz > /tmp/chat_old/chat_train.jsonl
fi
[ -s /tmp/chat_old/chat_train.jsonl ] || { echo "carry .carry/chat (chat_train.jsonl.gz)"; exit 3; }
echo "chat records: $(wc -l < /tmp/chat_old/chat_train.jsonl) (3072 since the sixth session)"
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_LONGSPEC_USR_SHARE=/tmp/usr_share_train
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
echo "setup $((SECONDS - START)) s"

R="$OUT/seq_ablation"
mkdir -p "$R"
# shellcheck disable=SC2086  # SEEDS is a list of seeds
timeout -k 10 "$LIMIT" python benchmarks/ablate_training.py --out "$R" --init-draft untrained \
  --steps "$STEPS" --seeds $SEEDS --seq-len 2048 --batch-size 16 --lr "${LR:-2e-3}" --warmup-steps "${WARMUP:-20}" \
  --corpus-mix chat=0.35,code=0.2,prose=0.1,docs=0.1,man=0.1,multilingual=0.1,pylib=0.05 \
  --corpus-max-epochs 2 --max-tokens 40000000 --chat-data /tmp/chat_old/chat_train.jsonl \
  --eval-kinds code prose chat --eval-lengths 2048 4096 8000 --eval-prompts 2 --new-tokens 64 \
  --variant base --variant seq4k=seq_len:4096,batch_size:8 \
  > "$OUT/seq_ablation.log" 2>&1
echo "ablation exit $? after $((SECONDS - START)) s"
grep -E "seed [0-9]+: tau|^\||tau per kind|rror" "$OUT/seq_ablation.log" || tail -20 "$OUT/seq_ablation.log"
rm -rf "$R/runs"   # the drafts stay here (too deep to come back); ablation.json has what was measured
ls -la "$R"
echo "total $((SECONDS - START)) s"
