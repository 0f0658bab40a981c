#!/usr/bin/env bash
# x2 call 4 (no carry, same warm machine after the embedded model was installed in /tmp/site):
# the tree shape chosen on speed at batch 1 (issues 11 and 12): decode_bench with the default tree
# and smaller ones, vanilla static measured in the same run; 8k prompts on GPU 1, and on GPU 0 first
# a profile of one round phase by phase (where the batch-1 round's time goes), then 4k prompts.
set -u
[ -d /tmp/site ] || source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
trees() {  # trees GPU LENGTH LIMIT
  CUDA_VISIBLE_DEVICES=$1 timeout $3 python benchmarks/decode_bench.py --out "$OUT/trees_$2" \
    --lengths $2 --prompts 3 --repeats 2 --methods vanilla_static longspec \
    --trees ${TREES:-4-16-12 4-8-8-8-8 2-4-4-4-4} --fp32-prompts 0 > "$OUT/trees_$2.log" 2>&1
}
(
  CUDA_VISIBLE_DEVICES=0 timeout 150 python benchmarks/profile_round.py --out "$OUT/profile" --length 8000 \
    > "$OUT/profile.log" 2>&1
  trees 0 4096 400
) &
trees 1 8000 560 &
wait
cat "$OUT/profile/profile_round.md" 2>/dev/null | head -40
grep -h "^|" "$OUT"/trees_*/decode_bench.md
