#!/usr/bin/env bash
# 2-GPU call (kind nvidia-h200-x2): a long data-parallel draft training run of the embedded SmolLM2
# target on the real corpus, BUDGET seconds of training per call, resumable on the next machine.
#
#   first call (fresh run):  call 1 parks part a (carry [".carry/a"]: mkdir -p /tmp/m && cp .carry/a/* /tmp/m/),
#                            then carry [".carry/b"]:  BUDGET=330 bash benchmarks/device/x2_train_long.sh
#   a later call (resume):   park part a, install (carry [".carry/b"]: source benchmarks/device/setup_model.sh),
#                            then carry [".carry/x2_resume"] holding the ckpt.tar.part-* files an earlier
#                            call returned:   BUDGET=330 bash benchmarks/device/x2_train_long.sh
#                            (the checkpoint is ~50 MB: it cannot travel with part b in one call)
#   the next call on the same warm machine: IN_PLACE=1 (no carry) continues from the newest checkpoint
#                            the previous call left in /tmp/x2_long, with no tar round trip
#
# TRAIN_ARGS adds options, e.g. TRAIN_ARGS="--corpus-mix chat --chat-data /tmp/chat/chat_train.jsonl" after
# x2_chat_data.sh on the same warm machine (keep them the same when resuming).
# --max-steps TOTAL_STEPS is the whole run's length on every call (it sets the cosine schedule);
# --max-seconds BUDGET stops the run and saves a checkpoint. Returns in $OUT/x2_long/:
# ckpt.tar.part-* (the last checkpoint: fp32 weights, optimizer, scheduler, RNG states; 15 MiB parts),
# final_bf16.tar (the draft folder in bf16, Hub-ready; in 15 MiB parts final_bf16.tar.part-* when larger),
# train.log, summary.json. 7 files, < 64 MiB (3 once the run is over, 4 with a draft in parts). A checkpoint
# that does not fit within 60 MiB beside them (a draft with --intermediate-size 4608 in TRAIN_ARGS) is not
# returned: such a run continues only in place (IN_PLACE=1).
set -u
set -o pipefail
START=$SECONDS
BUDGET=${BUDGET:-330}                  # seconds of training; loading, tokenizing 60M tokens, saving and
                                       # packing took 98-114 s per one-GPU call (fifteenth session, BUDGET=430
                                       # in 544 s): keep BUDGET <= 440 in a 600 s call. A later call on the same
                                       # machine loads the tokens from /tmp/x2_data_cache (--data-cache) instead
TOTAL_STEPS=${TOTAL_STEPS:-12000}      # whole run over all calls (~5000 DP steps per 330 s call, estimated)
MAX_TOKENS=${MAX_TOKENS:-60000000}     # the same on every call: a resumed run must see the same data
RESUME_DIR=${RESUME_DIR:-.carry/x2_resume}
SEQ=${SEQ:-2048}; BATCH=${BATCH:-8}    # per rank (global 16); keep them when resuming
NPROC=${NPROC:-2}                      # GPUs (NPROC=1 with BATCH=16 on the one-GPU kind: the same global batch)
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 OMP_NUM_THREADS=4
# the packed train split of man pages and translations (.carry/ust, unpacked by an earlier call into
# /tmp/call10) when it is there: a resumed run must read the same text, so unpack it on every call or on none
if [ -d /tmp/call10/usr_share_train ]; then export HF_LONGSPEC_USR_SHARE=/tmp/call10/usr_share_train; fi
echo "usr_share: ${HF_LONGSPEC_USR_SHARE:-the machine /usr/share}"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1   # no NVLink multicast
R="$OUT/x2_long"; W=/tmp/x2_long
mkdir -p "$R"

RESUME=()
if [ "${IN_PLACE:-0}" = 1 ]; then
  ls -d "$W"/checkpoint-* > /dev/null 2>&1 || { echo "IN_PLACE=1: no checkpoint in $W (machine went cold?)"; exit 5; }
  rm -rf "$W/final" "$W/final_bf16"   # the previous call's draft: a call that dies before saving returns none
  RESUME=(--resume)
  echo "resuming in place from $(ls -d "$W"/checkpoint-* | sort -V | tail -1)"
else
  rm -rf "$W"; mkdir -p "$W"
  if ls "$RESUME_DIR"/ckpt.tar.part-* > /dev/null 2>&1; then
    cat "$RESUME_DIR"/ckpt.tar.part-* | tar -x -C "$W" || exit 5
    RESUME=(--resume)
    echo "resuming from $(ls -d "$W"/checkpoint-*)"
  fi
fi

timeout -k 10 $((BUDGET + 180)) python -m torch.distributed.run --nproc_per_node $NPROC --master_port 29513 \
  examples/train_draft.py --output "$W" --target embedded "${RESUME[@]}" \
  --max-steps "$TOTAL_STEPS" --max-seconds "$BUDGET" --seq-len "$SEQ" --batch-size "$BATCH" --lr 2e-3 --warmup-steps 20 \
  --max-tokens "$MAX_TOKENS" --save-steps 1000 --logging-steps 50 --data-cache /tmp/x2_data_cache ${TRAIN_ARGS:-} 2>&1 \
  | grep --line-buffered -v "it/s]" | tee "$R/train.log" | grep --line-buffered -E "'loss'|train_runtime|rror|saved"
echo "train exit ${PIPESTATUS[0]} after $((SECONDS - START)) s"

rm -rf "$W/final_bf16"   # an in-place call's export replaces the previous call's
if [ -f "$W/final/model.safetensors" ]; then
  python - "$W/final" "$W/final_bf16" <<'EOF'
import json, shutil, sys
from pathlib import Path
from safetensors.torch import load_file, save_file
src, dst = Path(sys.argv[1]), Path(sys.argv[2])
shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors"))
save_file({k: v.bfloat16() for k, v in load_file(src / "model.safetensors").items()}, dst / "model.safetensors",
          metadata={"format": "pt"})
config = json.loads((dst / "config.json").read_text())
(dst / "config.json").write_text(json.dumps({**config, "dtype": "bfloat16"}, indent=2))  # as the shipped draft
EOF
  if [ $? -eq 0 ]; then   # no half-written export
    tar -C "$W" -cf "$R/final_bf16.tar" final_bf16 || rm -f "$R/final_bf16.tar"
    # a file comes back only up to 16 MiB: a wider draft (--intermediate-size 4608: ~19 MB in bf16) comes in
    # parts; join them with  cat final_bf16.tar.part-* | tar -x
    if [ -f "$R/final_bf16.tar" ] && [ "$(stat -c %s "$R/final_bf16.tar")" -gt $((15 * 1024 * 1024)) ]; then
      split -b 15M "$R/final_bf16.tar" "$R/final_bf16.tar.part-" && rm "$R/final_bf16.tar"
    fi
  fi
fi
draft_back=0; ls "$R"/final_bf16.tar* > /dev/null 2>&1 && draft_back=1
# the last checkpoint (also after a kill: the periodic ones are kept), in parts that fit the way back;
# not once the run is over (checkpoint-TOTAL_STEPS) and its draft came back (final_bf16.tar or its parts): the 8 files
# a call returns are better spent on what measures it (eval_long_run.sh after this script; RETURN_CKPT=1 keeps them)
last=$(ls -d "$W"/checkpoint-* 2>/dev/null | sort -V | tail -1)
# A checkpoint that does not fit beside what is already in $R within 60 MiB (a wider draft's: ~115 MB with
# its optimizer state) could not come back or be carried to the next machine (64 MiB per call): it stays
# here for IN_PLACE=1 calls, whatever RETURN_CKPT says.
if [ -n "$last" ]; then
  ckpt_mib=$(du -sm "$last" | cut -f1)
  room_mib=$((60 - $(du -sm "$R" | cut -f1)))
  if [ "$(basename "$last")" != "checkpoint-$TOTAL_STEPS" ] || [ "$draft_back" = 0 ] || [ "${RETURN_CKPT:-0}" = 1 ]; then
    if [ "$ckpt_mib" -le "$room_mib" ]; then
      tar -C "$W" -cf - "$(basename "$last")" | split -b 15M - "$R/ckpt.tar.part-"
    else
      echo "$(basename "$last") is $ckpt_mib MiB, more than the $room_mib MiB a call can still carry back: not returned; continue it with IN_PLACE=1"
    fi
  fi
fi
python - "$W" "$last" > "$R/summary.json" <<'EOF'
import json, sys
from pathlib import Path
work, last = Path(sys.argv[1]), sys.argv[2]
final = work / "final"
speed = json.loads((final / "training_speed.json").read_text()) if (final / "training_speed.json").is_file() else None
log = json.loads((final / "training_log.json").read_text()) if (final / "training_log.json").is_file() else []
print(json.dumps({"last_checkpoint": Path(last).name if last else None, "speed": speed,
                  "loss": [(e["step"], e["loss"]) for e in log if "loss" in e]}, indent=2))
EOF
ls -la "$R"; du -sh "$R"
echo "total $((SECONDS - START)) s"
