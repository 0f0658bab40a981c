#!/usr/bin/env bash
# x2 call 4 (no carry, same warm machine after the embedded model was installed in /tmp/site):
# the tree shape chosen on speed at batch 1 (issues 11 and 12): decode_bench with the default tree
# and smaller ones, vanilla static measured in the same run; 4k prompts on GPU 0, 8k on GPU 1.
set -u
[ -d /tmp/site ] || source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
for gpu in 0 1; do
  length=$([ $gpu = 0 ] && echo 4096 || echo 8000)
  CUDA_VISIBLE_DEVICES=$gpu timeout 560 python benchmarks/decode_bench.py --out "$OUT/trees_$length" \
    --lengths $length --prompts 3 --repeats 2 --methods vanilla_static longspec \
    --trees ${TREES:-4-16-12 4-8-8-8-8 2-4-4-4-4} --fp32-prompts 0 > "$OUT/trees_$length.log" 2>&1 &
done
wait
grep -h "^|" "$OUT"/trees_*/decode_bench.md
