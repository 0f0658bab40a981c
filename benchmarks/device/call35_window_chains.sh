#!/usr/bin/env bash
# One-GPU call (thirty-fifth session; issue 12): the cross-attention window and the second lookup chain on the H200.
# The thirty-third session's call33_window.sh, run beside four more processes on the one GPU:
#   - float32 exactness on the embedded target: two lookup chains and a window of 1024, plain greedy compared
#     (tau_curve --check-exact; captured rounds without compile);
#   - the default decoder (lookup 32) with the window, and with two chains, 24 prompts per kind at 8000, paired by
#     digest against the thirty-first session's tau_gpu24_default.json (compare_tau.py).
#
# After parking parts a, a2, a3 (device README), with carry [".carry/b"]:
#   W=2048 bash benchmarks/device/call35_window_chains.sh
set -u
START=$SECONDS
W=${W:-2048}
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src
D=/tmp/c35  # everything here, returned as one tarball (a call returns at most 8 files)
mkdir -p $D
trap 'tar czf "$OUT/call35.tgz" -C /tmp c35' EXIT
# one process first, so that the converted folder is written once and the others load from it
timeout -k 10 200 python benchmarks/tau_curve.py --out "$D/exact_fp32" --dtype float32 --check-exact 2048 \
  --lengths 2048 --kinds code prose --prompts 2 --new-tokens 128 --lookup-tokens 32 --lookup-chains 2 \
  --cross-attention-window 1024 --no-compile > "$D/exact_fp32.log" 2>&1 &
sleep 45
timeout -k 10 200 python benchmarks/gpu_round_check.py --dtypes float32 --ranks 1 --cross-attention-window 256 \
  > "$D/gpu_round_check_window.log" 2>&1 &
for kind in code prose chat; do
  timeout -k 10 "${LIMIT:-260}" python benchmarks/tau_curve.py --out "$D/win$W/$kind" --align end --lookup-tokens 0 \
    --lengths 4096 8000 --kinds "$kind" --prompts 24 --new-tokens 128 --no-compile --cross-attention-window "$W" \
    > "$D/win${W}_$kind.log" 2>&1 &
done
timeout -k 10 "${LIMIT:-260}" python benchmarks/tau_curve.py --out "$D/default_win$W" --align end --lookup-tokens 32 \
  --lengths 8000 --kinds code prose chat --prompts 24 --new-tokens 128 --no-compile --cross-attention-window "$W" \
  > "$D/default_win$W.log" 2>&1 &
timeout -k 10 "${LIMIT:-260}" python benchmarks/tau_curve.py --out "$D/default_chains2" --align end --lookup-tokens 32 \
  --lookup-chains 2 --lengths 8000 --kinds code prose chat --prompts 24 --new-tokens 128 --no-compile \
  > "$D/default_chains2.log" 2>&1 &
wait
echo "tau curves and checks done after $((SECONDS - START)) s"
grep "kernel window\|FAILURES" "$D/gpu_round_check_window.log"
tail -4 "$D/exact_fp32.log"
for kind in code prose chat; do
  python benchmarks/compare_tau.py "whole=docs/results/session32_2026-12-04/certainty_tau_$kind.json" \
    "window$W=$D/win$W/$kind/runs.jsonl" --lengths 8000 > "$D/compare_win${W}_$kind.md" 2>&1
  tail -3 "$D/compare_win${W}_$kind.md"
done
for run in default_win$W default_chains2; do
  python benchmarks/compare_tau.py "default=docs/results/session31_2026-12-04/tau_gpu24_default.json" \
    "$run=$D/$run/runs.jsonl" --lengths 8000 > "$D/compare_$run.md" 2>&1
  tail -3 "$D/compare_$run.md"
done
timeout -k 10 "${PROFILE_LIMIT:-180}" python benchmarks/profile_round.py --out "$D/profile_win$W" --length 8000 \
  --cross-attention-window "$W" > "$D/profile_win$W.log" 2>&1
echo "profile exit $? after $((SECONDS - START)) s"
grep -A4 "Reading the anchors" "$D/profile_win$W/profile_round.md"
