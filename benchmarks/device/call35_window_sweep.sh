#!/usr/bin/env bash
# One-GPU call (thirty-fifth session; issue 12), after call35_window_chains.sh: which window, and the window end to end.
# 1. The tree alone reading windows of 1024 (at 4096 and 8000) and 4096 (at 8000) target entries, 24 prompts per kind,
#    the prompts of call35_window_chains.sh's 2048 (six processes on the one GPU; tau only).
#    The window of 2048 at 2048 (tree alone) and at 2048 and 4096 (the default decoder), for the README's table.
# 2. Then, alone on the GPU: decode_bench at 8000 on code, prose and docs (6 prompts each, 2 repeats), the default
#    decoder with and without a window of 2048, vanilla static the baseline.
#
# After parking parts a, a2, a3, a4 (device README), with carry [".carry/b"]:
#   bash benchmarks/device/call35_window_sweep.sh
set -u
START=$SECONDS
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src
D=/tmp/c35b  # everything here, returned as one tarball (a call returns at most 8 files)
mkdir -p $D
trap 'tar czf "$OUT/call35b.tgz" -C /tmp c35b' EXIT
for kind in code prose chat; do
  timeout -k 10 "${LIMIT:-200}" python benchmarks/tau_curve.py --out "$D/win1024/$kind" --align end --lookup-tokens 0 \
    --lengths 4096 8000 --kinds "$kind" --prompts 24 --new-tokens 128 --no-compile --cross-attention-window 1024 \
    > "$D/win1024_$kind.log" 2>&1 &
  timeout -k 10 "${LIMIT:-200}" python benchmarks/tau_curve.py --out "$D/win4096/$kind" --align end --lookup-tokens 0 \
    --lengths 8000 --kinds "$kind" --prompts 24 --new-tokens 128 --no-compile --cross-attention-window 4096 \
    > "$D/win4096_$kind.log" 2>&1 &
done
# the window of 2048 at the lengths call35_window_chains.sh left out: the tree alone at 2048 (its cache outgrows 2052
# entries while it writes), the default decoder at 2048 and 4096, so the README's draft-quality table can be
# re-measured with the window in every cell
timeout -k 10 "${LIMIT:-200}" python benchmarks/tau_curve.py --out "$D/win2048_tree_2k" --align end --lookup-tokens 0 \
  --lengths 2048 --kinds code prose chat --prompts 24 --new-tokens 128 --no-compile --cross-attention-window 2048 \
  > "$D/win2048_tree_2k.log" 2>&1 &
timeout -k 10 "${LIMIT:-200}" python benchmarks/tau_curve.py --out "$D/win2048_default_2k4k" --align end --lookup-tokens 32 \
  --lengths 2048 4096 --kinds code prose chat --prompts 24 --new-tokens 128 --no-compile --cross-attention-window 2048 \
  > "$D/win2048_default_2k4k.log" 2>&1 &
wait
echo "tau curves done after $((SECONDS - START)) s"
for W in 1024 4096; do
  for kind in code prose chat; do
    python benchmarks/compare_tau.py "whole=docs/results/session31_2026-12-04/tau_gpu24_tree.json" \
      "window$W=$D/win$W/$kind/runs.jsonl" --lengths 4096 8000 > "$D/compare_win${W}_$kind.md" 2>&1
    grep against "$D/compare_win${W}_$kind.md"
    tail -3 "$D/compare_win${W}_$kind.md"
  done
done
timeout -k 10 "${BENCH_LIMIT:-330}" python benchmarks/decode_bench.py --out "$D/bench" --lengths 8000 \
  --kinds code prose docs --prompts 6 --repeats 2 --methods vanilla_static longspec --windows 2048 --fp32-prompts 0 \
  > "$D/bench.log" 2>&1
echo "bench exit $? after $((SECONDS - START)) s"
grep -v "tok/s\|Warn\|warn\|Loading" "$D/bench.log" | tail -20
