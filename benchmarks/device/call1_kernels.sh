#!/usr/bin/env bash
# GPU call 1: park the first half of the model; kernel correctness on CUDA; attention benchmark.
set -u
mkdir -p /tmp/m && cp .carry/a/* /tmp/m/
export PYTHONPATH=src PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
  date -u; } | tee "$OUT/machine.txt"
timeout 120 python -m pytest -q -x tests/test_fused_mask_attn.py tests/test_hybrid_attention.py 2>&1 | tail -15 | tee "$OUT/kernel_tests.txt"
timeout 330 python benchmarks/attention_bench.py --out "$OUT/attention_bench.json" 2>&1 | tee "$OUT/attention_log.txt" | tail -40
