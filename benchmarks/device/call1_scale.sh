#!/usr/bin/env bash
# GPU call (carry [".carry/a"]): park part a of the embedded model, then the 8B-shape scale study
# (captured LongSpec round vs generate(cache_implementation="static"), bytes floors); ~4 minutes.
set -u
mkdir -p /tmp/m && cp .carry/a/* /tmp/m/
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 420 python benchmarks/scale_study.py --out "$OUT/scale" --vanilla-contexts 8192 32768 --compile-contexts 32768 2>&1 \
  | grep -v -i warn | tail -30 | tee "$OUT/scale_log.txt"
