#!/usr/bin/env bash
# One-GPU call 2 (carry [".carry/b"], right after call 1 parked part a): install the embedded model;
# chat training data answered by the target (x2_chat_data.sh on GPU 0, /tmp/chat/chat_train.jsonl for
# call 3) and, beside it on the same GPU, held-out tau of the shipped draft per tree shape (bf16,
# greedy, captured rounds without compile: tau does not depend on it) at 2k/4k/8k code, prose, chat:
# what a drafted node buys, for the node budget.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PROMPTS=${PROMPTS:-640} GPUS=0 LIMIT=${CHAT_LIMIT:-330} bash benchmarks/device/x2_chat_data.sh > "$OUT/chat_data.log" 2>&1 &
TREES=${TREES:-4-16-16-16-16 4-16-12 4-8-8-8-4 2-6-8-8-8 4-12 2-4-4-3-3 1-3-4-4-4 1-2-2-2-1 2-2-2-2} bash benchmarks/device/tau_trees.sh
wait
tail -3 "$OUT/chat_data.log"
