#!/usr/bin/env bash
# GPU call (no model needed): kernel correctness on CUDA, the attention benchmark, the decode-loop smoke test.
set -u
export PYTHONPATH=src PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python -c "import torch, transformers, triton; print('torch', torch.__version__, 'transformers', transformers.__version__, 'triton', triton.__version__)"
  date -u; } | tee "$OUT/machine.txt"
timeout 150 python -m pytest -q -x tests/test_fused_mask_attn.py tests/test_hybrid_attention.py 2>&1 | tail -15 | tee "$OUT/kernel_tests.txt"
timeout 240 python benchmarks/gpu_round_check.py 2>&1 | tail -40 | tee "$OUT/gpu_round_check.txt"
timeout 280 python benchmarks/attention_bench.py --out "$OUT/attention_bench.json" 2>&1 | tee "$OUT/attention_log.txt" | tail -40
