#!/usr/bin/env bash
# One-GPU call 2 (carry [".carry/b"], right after call 1): install the embedded model; the captured
# round's GPU exactness check; the SmolLM2 round profile at 8k; the end-to-end decode benchmark
# (LongSpec vs vanilla static, 4k and 8k code and prose, float32 exactness on one prompt).
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
timeout 60 python benchmarks/gpu_round_check.py > "$OUT/round_check.txt" 2>&1; tail -4 "$OUT/round_check.txt"
timeout 150 python benchmarks/profile_round.py --out "$OUT/prof" --length 8000 > "$OUT/prof.log" 2>&1
head -1 "$OUT/prof/profile_round.md" 2>/dev/null || tail -5 "$OUT/prof.log"
python -c "
import json; r=json.load(open('$OUT/prof/profile_round.json'))['longspec']; print('variants', r['variants'])
for k,v in r['per_phase'].items(): print(k, v['kernels_per_round'], [(x['name'][:40], round(x['ms_per_unit'],3)) for x in v['top_kernels'][:10]])
" 2>/dev/null
timeout ${DECODE_LIMIT:-360} python benchmarks/decode_bench.py --out "$OUT/decode" --lengths 4096 8000 --prompts 3 \
  --repeats 2 --methods vanilla_static longspec --fp32-prompts 1 2>&1 | grep -v -i warn | tail -22
