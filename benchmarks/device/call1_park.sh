#!/usr/bin/env bash
# GPU call 1 of a model session: park the first half of the model wheel; re-run the decode-loop smoke test.
set -u
mkdir -p /tmp/m && cp .carry/a/* /tmp/m/ && ls -la /tmp/m
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 150 python benchmarks/gpu_smoke.py 2>&1 | tail -12 | tee "$OUT/gpu_smoke.txt"
