#!/usr/bin/env bash
# One-GPU call (fortieth session; issue 12): a candidate draft on the measure of record, the thirty-first session's
# 24 prompts per kind (code, prose, chat) at 2048, 4096 and 8000, bf16, greedy, 128 new tokens, cut from the
# 8000-token prompts (--suffix-of 8000) so every cell pairs with the shipped draft's record
# (docs/results/session38_2026-12-05/tau_gpu24_win8k_tree.json.gz, ..._default_2k_8k.json.gz): the tree alone
# (--lookup-tokens 0) and the default (the 32-token chain). One process per (mode, kind, length): 18 share the GPU.
# The draft reads the window its config names. Returns one tarball. On the warm machine after call40_stage2.sh:
#   DRAFT=/tmp/c40/seed0/runs/stage2-seed0/final bash benchmarks/device/call40_cells.sh
set -u
START=$SECONDS
source benchmarks/device/train_text_env.sh
: "${DRAFT:?name the draft folder: DRAFT=...}"
D=/tmp/c40c
mkdir -p $D
trap 'tar czf "$OUT/call40c.tgz" -C /tmp c40c' EXIT
for lookup in 0 32; do
  for kind in code prose chat; do
    for length in 2048 4096 8000; do
      name=lookup${lookup}_${kind}_$length
      timeout -k 5 "${LIMIT:-240}" python benchmarks/tau_curve.py --out "$D/$name" --draft "$DRAFT" --align end \
        --suffix-of 8000 --lookup-tokens $lookup --lengths $length --kinds $kind --prompts 24 --new-tokens 128 \
        --no-compile > "$D/$name.log" 2>&1 &
    done
  done
done
wait
for f in $D/*/tau_curve.json; do python benchmarks/device/tau_summary.py "$f" "$(basename "$(dirname "$f")")"; done
echo "total $((SECONDS - START)) s"
