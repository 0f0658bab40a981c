#!/usr/bin/env bash
# GPU call 1 of a model session: park the first half of the model wheel; re-run the decode-loop smoke test.
set -u
mkdir -p /tmp/m && cp .carry/a/* /tmp/m/ && ls -la /tmp/m
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 240 python benchmarks/gpu_round_check.py 2>&1 | tail -40 | tee "$OUT/gpu_round_check.txt"
