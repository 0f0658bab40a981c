#!/usr/bin/env bash
# GPU call (carry [".carry/b"], right after a call that parked part a; ninth session):
# 1. tau against context with suffix-aligned prompts (tau_curve.py --align end: every length of a
#    prompt continues the same text), bf16, the greedy default (tree + 32-token chain) and the tree
#    alone, then the old start-aligned form beside it; 4 prompts per (kind, length);
# 2. sampled decode with the walk compiled per depth, against vanilla static sampled in the same run,
#    and the float32 greedy exactness check (decode_bench's --fp32-prompts).
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
PROMPTS=${PROMPTS:-4}
for form in "end default" "end tree" "start default"; do
  set -- $form
  lookup=(); [ "$2" = tree ] && lookup=(--lookup-tokens 0)
  timeout "${TAU_TIMEOUT:-100}" python benchmarks/tau_curve.py --out "$OUT/tau_$1_$2" --align "$1" "${lookup[@]}" \
    --lengths 1024 2048 4096 8000 --kinds code prose chat --prompts "$PROMPTS" --new-tokens 64 --no-compile 2>&1 \
    | grep -v -i warn | tail -16 | tee "$OUT/tau_$1_$2.log"
done
timeout "${DECODE_TIMEOUT:-300}" python benchmarks/decode_bench.py --out "$OUT/decode_sampled" \
  --lengths 4096 8000 --kinds code prose --prompts 1 --repeats 2 \
  --methods vanilla_static_sampled longspec_sampled --fp32-prompts 2 2>&1 \
  | grep -v -i warn | tail -30 | tee "$OUT/decode_sampled_log.txt"
