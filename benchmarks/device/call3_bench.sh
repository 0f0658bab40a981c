#!/usr/bin/env bash
# GPU call 3: end-to-end benchmark with the draft from call 2, scale study, fp32 exactness.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
DRAFT=${DRAFT:-/tmp/draft}
[ -d "$DRAFT" ] || DRAFT=model_cards/longspec-smollm2-135m-instruct
timeout 100 python -m hf_longspec.cli run --draft "$DRAFT" --dtype float32 --prompt-tokens 4000 2>&1 | tail -8 | tee "$OUT/run_fp32.txt"
timeout 330 python -m hf_longspec.cli bench --draft "$DRAFT" --output "$OUT/bench" --lengths 2048 4096 8000 --max-new-tokens 128 --no-progress 2>&1 | grep -v "it/s]" | tail -40 | tee "$OUT/bench_log.txt"
timeout 150 python benchmarks/scale_study.py --tau-from "$OUT/bench/bench.json" --out "$OUT/scale_study.json" 2>&1 | tail -20 | tee "$OUT/scale_log.txt"
