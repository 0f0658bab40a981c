#!/usr/bin/env bash
# One-GPU call (planned in the thirty-fifth session; issue 12): fine-tune the shipped draft on 8192-token sequences
# reading the window it would read at 8k (cross_attention_window 2048: the 4 anchors and the newest 2048 target
# entries, what it saw at 2048 in training), beside the same fine-tune reading every entry (the tenth session's
# seq8k, which did not beat its start). The thirty-fifth session found the window worth +0.06 tau alone at 8k
# (prose +0.10) with the shipped weights; the question is whether weights trained to read it gain more.
# call10_finetune.sh does the work (the starting draft measured, then each variant from it, tau of the tree alone
# on code, prose and chat at 2048 and 8000); a variant's draft evaluates with its own config's window.
# Chat records: the twenty-eighth session's, tracked (no records made in the call).
#
# After parking parts a, a2, a3, a4 and carrying b (setup_model.sh), and unpacking .carry/ust into /tmp/call10
# (device README), no carry:
#   bash benchmarks/device/call36_window_finetune.sh
set -u
mkdir -p /tmp/call10
[ -s /tmp/call10/chat_train.jsonl ] || gunzip -c docs/results/session28_2026-12-04/chat_train.jsonl.gz > /tmp/call10/chat_train.jsonl
export SEEDS=${SEEDS:-0} STEPS=${STEPS:-800}
# lr 5e-4: seq8k_lr5 tied with its start in the fourteenth session, where lr 1e-3 lost (docs/training.md)
export VARIANTS='--variant seq8k_lr5=seq_len:8192,batch_size:4,learning_rate:5e-4 --variant win8k_lr5=seq_len:8192,batch_size:4,learning_rate:5e-4,draft_overrides:{"cross_attention_window":2048}'
bash benchmarks/device/call10_finetune.sh
