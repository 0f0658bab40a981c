#!/usr/bin/env bash
# GPU call (carry [".carry/b"], right after a call that parked part a; ninth session): the measure of
# record of tau against context with suffix-aligned prompts (tau_curve.py --align end), bf16, 6 prompts
# per (kind, length), 128 new tokens, the greedy default (tree + 32-token chain) and the tree alone;
# then the greedy default's decode speed at 4k against vanilla static and the float32 exactness check
# (compiled, graphs only, eager; decode_bench's --fp32-prompts). At most 8 files come back: JSON and logs.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
for form in default tree; do
  lookup=(); [ "$form" = tree ] && lookup=(--lookup-tokens 0)
  timeout "${TAU_TIMEOUT:-130}" python benchmarks/tau_curve.py --out /tmp/tau_$form --align end "${lookup[@]}" \
    --lengths 1024 2048 4096 8000 --kinds code prose chat --prompts "${PROMPTS:-6}" --new-tokens 128 --no-compile 2>&1 \
    | grep -v -i warn | tail -16 > "$OUT/tau_aligned_$form.log"
  cp /tmp/tau_$form/tau_curve.json "$OUT/tau_aligned_$form.json"; tail -14 "$OUT/tau_aligned_$form.log"
done
timeout "${DECODE_TIMEOUT:-280}" python benchmarks/decode_bench.py --out /tmp/decode_greedy \
  --lengths 4096 --kinds code --prompts 1 --repeats 1 --methods vanilla_static longspec --fp32-prompts 2 2>&1 \
  | grep -v -i warn | grep -v "de-quantizing\|Loading weights" | tail -20 > "$OUT/decode_greedy.log"
cp /tmp/decode_greedy/decode_bench.json "$OUT/decode_greedy.json"; tail -12 "$OUT/decode_greedy.log"
