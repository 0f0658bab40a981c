#!/usr/bin/env bash
# Sourced by the calls that read the train-split text (call10_finetune, call14_records, call16_depth,
# call19_target_text): the embedded model installed once per machine (setup_model.sh), the text
# unpacked into /tmp/call10 from .carry/ust once per machine (carry it on the first call), and the
# environment their python runs in. Sets W=/tmp/call10.
W=/tmp/call10
mkdir -p $W
source benchmarks/device/setup_model.sh
if [ ! -d $W/usr_share_train ] && [ -f .carry/ust/ust.tgz ]; then tar xzf .carry/ust/ust.tgz -C $W; fi
[ -d $W/usr_share_train ] || { echo "unpack .carry/ust into $W first (or carry it)"; exit 3; }
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_LONGSPEC_USR_SHARE=$W/usr_share_train
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
