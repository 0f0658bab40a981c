#!/usr/bin/env bash
# One-GPU call (thirty-sixth session; issue 12): the cross-attention window of 2048 in the README's draft-quality
# cells it lacked, paired with the thirty-first session's record. The thirty-fifth session's 2048 cells were cut
# from that run's own longest prompt (2048 or 4096), so they measured other text; --suffix-of 8000 cuts them from
# the 8000-token prompts, as the record's were.
#   - the tree alone at 2048 (tau_gpu24_tree.json), 3 kinds x 24 prompts;
#   - the default decoder (tree + 32-token chain) at 2048 and 4096, 3 kinds x 24 prompts (tau_gpu24_default.json).
# Six processes share the GPU (tau only, no timings). Returns one tarball.
# On a machine where the model is installed (setup_model.sh), no carry:
#   bash benchmarks/device/call36_window_2k.sh
set -u
START=$SECONDS
export PYTHONPATH=/tmp/site:src
D=/tmp/c36w
mkdir -p $D
trap 'tar czf "$OUT/call36w.tgz" -C /tmp c36w' EXIT
R=docs/results/session31_2026-12-04
for kind in code prose chat; do
  timeout -k 10 "${LIMIT:-200}" python benchmarks/tau_curve.py --out "$D/tree2k/$kind" --align end --lookup-tokens 0 \
    --lengths 2048 --suffix-of 8000 --kinds "$kind" --prompts 24 --new-tokens 128 --no-compile \
    --cross-attention-window 2048 > "$D/tree2k_$kind.log" 2>&1 &
done
for kind in code prose chat; do
  timeout -k 10 "${LIMIT:-200}" python benchmarks/tau_curve.py --out "$D/default/$kind" --align end --lookup-tokens 32 \
    --lengths 2048 4096 --suffix-of 8000 --kinds "$kind" --prompts 24 --new-tokens 128 --no-compile \
    --cross-attention-window 2048 > "$D/default_$kind.log" 2>&1 &
done
wait
echo "tau curves done after $((SECONDS - START)) s"
for kind in code prose chat; do
  python benchmarks/compare_tau.py "whole=$R/tau_gpu24_tree.json" "window2048=$D/tree2k/$kind/runs.jsonl" \
    --lengths 2048 > "$D/compare_tree2k_$kind.md" 2>&1
  grep -i "against\|refused\|error" "$D/compare_tree2k_$kind.md"; tail -3 "$D/compare_tree2k_$kind.md"
done
for kind in code prose chat; do
  python benchmarks/compare_tau.py "whole=$R/tau_gpu24_default.json" "window2048=$D/default/$kind/runs.jsonl" \
    --lengths 2048 4096 > "$D/compare_default_$kind.md" 2>&1
  grep -i "against\|refused\|error" "$D/compare_default_$kind.md"; tail -3 "$D/compare_default_$kind.md"
done
echo "total $((SECONDS - START)) s"
