#!/usr/bin/env bash
# Each trained draft folder given (an ablation's runs/NAME/final) into $OUT as draft_NAME.tar, its weights cast to
# bf16 first (one file each, as shipped). A call returns files of at most 16 MiB: a larger tar (a wider draft's, 19 MB
# at 3x the MLP) comes back in parts. Used by call10_finetune.sh and call40_stage2.sh.
#   bash benchmarks/device/pack_drafts.sh RUNS/*/final
set -u
for run in "$@"; do
  name=$(basename "$(dirname "$run")")
  python - "$run" <<'PY'
import sys, torch
from safetensors.torch import load_file, save_file
path = sys.argv[1] + "/model.safetensors"
save_file({k: v.to(torch.bfloat16) for k, v in load_file(path).items()}, path, metadata={"format": "pt"})
PY
  tar cf "$OUT/draft_$name.tar" -C "$run" .
  if [ "$(stat -c %s "$OUT/draft_$name.tar")" -gt 15000000 ]; then
    split -b 15000000 "$OUT/draft_$name.tar" "$OUT/draft_$name.tar.part-" && rm "$OUT/draft_$name.tar"
  fi
done
