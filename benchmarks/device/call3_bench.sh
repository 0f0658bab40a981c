#!/usr/bin/env bash
# GPU call (carry [".carry/b"], right after a call that parked part a): the Fast LongSpec end-to-end
# benchmark against vanilla static (with float32 exactness), then the 8B-shape scale study.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
timeout 540 python benchmarks/decode_bench.py --out "$OUT/decode" --lengths 4096 8000 --prompts 3 --repeats 2 2>&1 \
  | grep -v -i warn | tail -40 | tee "$OUT/decode_log.txt"
