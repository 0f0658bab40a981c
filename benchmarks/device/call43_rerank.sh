#!/usr/bin/env bash
# One-GPU call (forty-third session; issue 12): the GPU's measure of record (24 prompts per kind at 2k, 4k and 8k,
# bf16, greedy, 128 new tokens, each shorter prompt the tail of its 8000-token one) with the tree's leaves re-ranked
# (longspec_rerank_leaves) and without, side by side in one run: the draft alone (--lookup-tokens 0) and the default
# decoder (the 32-token chain). Twelve processes share the GPU (ARMS="tree tree_rerank": the draft alone only, six).
# The arms tree_rerank24 and tree_rerank32 (forty-fourth session) re-rank 24 or 32 leaves (77 or 85 rows verified).
# The arms tree_rerank_d6 and dec_rerank_d6 (fifty-third session) draft a sixth depth of 16 (4-16-16-16-16-16).
# LENGTHS (default "2048 4096 8000") picks the context lengths; the fifty-first session ran LENGTHS=1024 (the GPU's
# 1k point of the shipped config, each prompt the tail of its 8000-token one).
# After parking a, a2..a5 (device README):
#   carry [".carry/b"]: source benchmarks/device/setup_model.sh && bash benchmarks/device/call43_rerank.sh
set -u
START=$SECONDS
D=/tmp/c43
mkdir -p $D
trap 'tar czf "$OUT/call43.tgz" -C /tmp c43' EXIT
cell() {
  local name=$1; shift
  PYTHONPATH=/tmp/site:src timeout -k 5 "${LIMIT:-500}" python benchmarks/tau_curve.py --out "$D/$name" --align end \
    --prompts 24 --new-tokens 128 --no-compile --suffix-of 8000 --lengths ${LENGTHS:-2048 4096 8000} "$@" > "$D/$name.log" 2>&1 &
}
declare -A ARM_OPTIONS=([tree]="--lookup-tokens 0 --no-rerank-leaves" [tree_rerank]="--lookup-tokens 0 --rerank-leaves"
                        [dec]="--lookup-tokens 32 --no-rerank-leaves" [dec_rerank]="--lookup-tokens 32 --rerank-leaves"
                        [tree_rerank24]="--lookup-tokens 0 --rerank-leaves --tree-widths 4 16 16 16 24"
                        [tree_rerank32]="--lookup-tokens 0 --rerank-leaves --tree-widths 4 16 16 16 32"
                        [tree_rerank_d6]="--lookup-tokens 0 --rerank-leaves --tree-widths 4 16 16 16 16 16"
                        [dec_rerank_d6]="--lookup-tokens 32 --rerank-leaves --tree-widths 4 16 16 16 16 16")
for kind in code prose chat; do
  for arm in ${ARMS:-tree tree_rerank dec dec_rerank}; do
    cell "${arm}_$kind" ${ARM_OPTIONS[$arm]} --kinds "$kind"
  done
done
wait
tail -n 2 "$D"/*.log
echo "total $((SECONDS - START)) s"
