#!/usr/bin/env bash
# x2 call 1 (carry [".carry/a"]): park part a of the embedded model; tensor-parallel exactness on 2 GPUs
# (float32, tiny and 8B-shape targets) and the 8B-shape TP round cost at 32k and 128k (~8 minutes).
set -u
mkdir -p /tmp/m && cp .carry/a/* /tmp/m/
export PYTHONPATH=src PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.device_count())'
mkdir -p "$OUT/tp"
timeout ${EXACT_LIMIT:-330} python benchmarks/tp_exactness.py --out "$OUT/tp" --gpus 2 --limit ${RUN_LIMIT:-140} 2>&1 | grep -v -i warn \
  | tee "$OUT/tp/exactness_log.txt" | tail -15
[ "${SKIP_STUDY:-0}" = 1 ] || timeout ${STUDY_LIMIT:-240} python -m torch.distributed.run --nproc_per_node 2 benchmarks/tp_study.py --out "$OUT/tp" ${TP_STUDY_ARGS:-} 2>&1 \
  | grep -v -i warn | tee "$OUT/tp/study_log.txt" | tail -25
