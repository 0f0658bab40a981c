#!/usr/bin/env bash
# 2-GPU call (kind nvidia-h200-x2, carry [".carry/b"], right after a call that parked part a):
# `hf-longspec train` on the embedded SmolLM2 target and the real corpus (default `wide` mix),
# the same STEPS and global batch three ways: (a) one GPU, (b) torchrun data parallel on 2 GPUs,
# (c) accelerate launch FSDP2 on 2 GPUs. Reports tokens/s after the first 5 steps, loss at equal
# steps, peak GPU memory per rank, and the max abs difference of FSDP's final weights from DP's.
# Writes $OUT/x2_train/{x2_train.json,x2_train.md,single.log,dp.log,fsdp.log}; ~300 s in all.
set -u
set -o pipefail
START=$SECONDS
TOTAL=${TOTAL:-300}                    # hard wall-time budget of the whole script, seconds
STEPS=${STEPS:-100}
BATCH=${BATCH:-16}                     # global batch: 16 on one GPU, 8 per rank on two
SEQ=${SEQ:-2048}
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 OMP_NUM_THREADS=4
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # no NVLink multicast
R="$OUT/x2_train"; W=/tmp/x2_work
mkdir -p "$R"; rm -rf "$W"; mkdir -p "$W"
# every run reads the same tokens: STEPS * BATCH chunks (each run tokenizes them itself, ~seconds;
# the training code has no shared dataset cache)
COMMON=(--target embedded --max-steps "$STEPS" --seq-len "$SEQ" --lr 2e-3 --warmup-steps 20
        --max-tokens $((STEPS * BATCH * SEQ + SEQ)) --save-steps 100000 --logging-steps 10)

run() {  # run NAME CAP_SECONDS COMMAND...: bounded by what is left of TOTAL (15 s kept for the report)
  local name=$1 cap=$2; shift 2
  local left=$((TOTAL - 15 - (SECONDS - START))); local limit=$((left < cap ? left : cap)) t0=$SECONDS
  if [ "$limit" -lt 30 ]; then echo "$name: skipped, ${left}s left"; echo "$name 124 0" >> "$W/status.tsv"; return; fi
  echo "== $name (limit ${limit}s)"
  timeout -k 5 "$limit" "$@" 2>&1 | grep --line-buffered -v "it/s]" | tee "$R/$name.log" \
    | grep --line-buffered -E "train_runtime|Error|error|draft saved"
  local rc=${PIPESTATUS[0]}
  echo "$name $rc $((SECONDS - t0))" | tee -a "$W/status.tsv"
}

nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader | tee "$W/gpus.txt"
run single 110 env CUDA_VISIBLE_DEVICES=0 python examples/train_draft.py --output "$W/single" --batch-size "$BATCH" "${COMMON[@]}"
run dp 100 python -m torch.distributed.run --nproc_per_node 2 --master_port 29511 \
  examples/train_draft.py --output "$W/dp" --batch-size $((BATCH / 2)) "${COMMON[@]}"
run fsdp 100 python -m accelerate.commands.launch --config_file examples/fsdp_accelerate_2gpu.yaml \
  --num_processes 2 --main_process_port 29512 \
  examples/train_draft.py --output "$W/fsdp" --batch-size $((BATCH / 2)) "${COMMON[@]}"

python - "$W" "$STEPS" "$BATCH" "$SEQ" > "$W/meta.json" <<'EOF'
import json, sys, accelerate, torch, transformers
work, steps, batch, seq = sys.argv[1:]
print(json.dumps({"gpus": open(f"{work}/gpus.txt").read().strip().splitlines(), "steps": int(steps),
                  "global_batch": int(batch), "seq_len": int(seq), "corpus_mix": "wide (default)",
                  "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                               "accelerate": accelerate.__version__}}))
EOF
timeout 60 python benchmarks/x2_train_report.py --work "$W" --out "$R" --meta "$W/meta.json" single dp fsdp
echo "total $((SECONDS - START)) s"
