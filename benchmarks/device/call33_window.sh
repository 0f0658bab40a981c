#!/usr/bin/env bash
# One-GPU call (planned in the thirty-third session; issue 12): the cross-attention window on the H200.
# First the windowed kernel and captured windowed rounds checked exact (gpu_round_check.py). Then the shipped draft reading the 4 anchors and the newest W target entries (cross_attention_window, read in
# place by the split-KV kernel since the thirty-third session), tree alone, bf16, 24 prompts per kind at
# 4096 and 8000 tokens, suffix-aligned: the same prompts (same digests) as the thirty-second session's
# docs/results/session32_2026-12-04/certainty_tau_*.json at 8000, so compare_tau.py pairs them. Then the
# round's cost with and without the window at 8000 (profile_round.py, graph replay and generate()).
#
# After parking parts a, a2, a3 (device README), with carry [".carry/b"]:
#   W=2048 bash benchmarks/device/call33_window.sh
# About 30-50 s of prompt building and 0.3 s a prompt per process (three processes on the one GPU), then
# the profile (~2-3 min: two decoders compiled and captured).
set -u
START=$SECONDS
W=${W:-2048}
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src
# first: the windowed kernel on the GPU against float32 math, and captured rounds reading a window (a 1500-token
# prompt, window 256) exact against plain greedy, graphs on and off
timeout -k 10 200 python benchmarks/gpu_round_check.py --dtypes float32 --ranks 1 --cross-attention-window 256 \
  > "$OUT/gpu_round_check_window.log" 2>&1
echo "gpu_round_check exit $? after $((SECONDS - START)) s"
grep "kernel window\|FAILURES" "$OUT/gpu_round_check_window.log"
for kind in code prose chat; do
  timeout -k 10 "${LIMIT:-300}" python benchmarks/tau_curve.py --out "$OUT/win$W/$kind" --align end --lookup-tokens 0 \
    --lengths 4096 8000 --kinds "$kind" --prompts 24 --new-tokens 128 --no-compile --cross-attention-window "$W" \
    > "$OUT/win${W}_$kind.log" 2>&1 &
done
wait
echo "tau curves done after $((SECONDS - START)) s"
for kind in code prose chat; do
  python benchmarks/compare_tau.py "whole=docs/results/session32_2026-12-04/certainty_tau_$kind.json" \
    "window$W=$OUT/win$W/$kind/runs.jsonl" --lengths 8000 > "$OUT/compare_win${W}_$kind.md" 2>&1
  tail -3 "$OUT/compare_win${W}_$kind.md"
done
timeout -k 10 "${PROFILE_LIMIT:-240}" python benchmarks/profile_round.py --out "$OUT/profile_win$W" --length 8000 \
  --cross-attention-window "$W" > "$OUT/profile_win$W.log" 2>&1
echo "profile exit $? after $((SECONDS - START)) s"
grep -A4 "Reading the anchors" "$OUT/profile_win$W/profile_round.md"
