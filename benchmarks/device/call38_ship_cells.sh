#!/usr/bin/env bash
# One-GPU call (thirty-eighth session; issue 12): the cells of the measure of record (the thirty-first session's
# 24 prompts per kind, bf16, greedy, 128 new tokens) that the draft shipped in the thirty-eighth session (win8k_lr5,
# its config reading the window of 2048) still lacks: the default decoder (the 32-token chain) at 1024 and 4096, the
# draft alone at 1024, and documentation at every length. Eight processes share the GPU; prompts are cut from the
# 8000-token ones (--suffix-of 8000), so they pair with the record. After parking a, a2, a3, a4 and unpacking ust
# (device README):
#   carry [".carry/b"]: bash benchmarks/device/call38_ship_cells.sh
# DRAFT=FOLDER measures that draft instead of the shipped one (fortieth session).
set -u
START=$SECONDS
source benchmarks/device/train_text_env.sh
D=/tmp/c38
mkdir -p $D
trap 'tar czf "$OUT/call38.tgz" -C /tmp c38' EXIT
cell() {
  local name=$1; shift
  timeout -k 5 "${LIMIT:-200}" python benchmarks/tau_curve.py --out "$D/$name" --align end --prompts 24 \
    --new-tokens 128 --no-compile --suffix-of 8000 ${DRAFT:+--draft "$DRAFT"} "$@" > "$D/$name.log" 2>&1 &
}
for kind in code prose chat; do
  cell "dec_$kind" --lookup-tokens 32 --lengths 1024 4096 --kinds "$kind"
  cell "tree1k_$kind" --lookup-tokens 0 --lengths 1024 --kinds "$kind"
done
cell dec_docs --lookup-tokens 32 --lengths 1024 2048 4096 8000 --kinds docs
cell tree_docs --lookup-tokens 0 --lengths 1024 2048 4096 8000 --kinds docs
wait
tail -n 2 "$D"/*.log
echo "total $((SECONDS - START)) s"
