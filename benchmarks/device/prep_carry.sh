#!/usr/bin/env bash
# Run on this (CPU) machine, in a new checkout, before the first GPU call of a training session:
# the carries that the one-GPU training calls expect (benchmarks/device/README.md), made in one go.
#   .carry/a, .carry/b   the embedded model in two halves and the gguf wheel (../shared/tools/device-carry-prep)
#   .carry/ust/ust.tgz   this machine's train split of man pages and translations, which the GPU machine
#                        lacks (train_text_env.sh and x2_train_long.sh unpack it into /tmp/call10);
#                        the same pack as every run since the thirteenth session, so a resumed run reads
#                        the same text
# Each part travels in a call of its own (the 64 MiB limit); the order is in the README's newest session.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
../shared/tools/device-carry-prep
if [ ! -f .carry/ust/ust.tgz ]; then
  rm -rf .carry/usr_share_train
  PYTHONPATH=src python benchmarks/pack_text.py --out .carry/usr_share_train --split train \
    --sources man multilingual --max-mb 40 --shuffle-seed 0
  mkdir -p .carry/ust
  tar czf .carry/ust/ust.tgz -C .carry usr_share_train
fi
du -sh .carry/a .carry/b .carry/ust
