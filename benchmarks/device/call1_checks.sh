#!/usr/bin/env bash
# One-GPU call 1 (carry [".carry/a"]): park part a of the embedded model; the attention kernel tests
# compiled on the GPU; the captured round's exactness check on tiny random Llamas (fp32 and bf16).
set -u
mkdir -p /tmp/m && cp .carry/a/* /tmp/m/
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 150 python -m pytest -q -p no:cacheprovider tests/test_fused_mask_attn.py tests/test_hybrid_attention.py \
  > "$OUT/kernel_tests.txt" 2>&1; tail -3 "$OUT/kernel_tests.txt"
timeout 90 python benchmarks/gpu_round_check.py > "$OUT/round_check.txt" 2>&1; tail -6 "$OUT/round_check.txt"
