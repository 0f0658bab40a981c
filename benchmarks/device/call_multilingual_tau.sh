#!/usr/bin/env bash
# One-GPU call (carry [".carry/usr_share_eval"], on a warm machine whose /tmp/site holds the model, e.g.
# right after call2_decode_batch.sh; else add ".carry/b" after a call that parked part a): held-out tau
# on non-English text in bf16, which that machine lacks (~1.4k tokens). .carry/usr_share_eval is this
# development machine's eval-split multilingual files (man pages, gettext catalogs), same relative
# paths, made by `python benchmarks/pack_text.py --out .carry/usr_share_eval` (15.8 MiB, 435 files);
# HF_LONGSPEC_USR_SHARE makes the corpus read /usr/share sources from it. CANDIDATE=FOLDER adds a draft.
set -u
[ -d /tmp/site ] || source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_LONGSPEC_USR_SHARE=$PWD/.carry/usr_share_eval
[ -f "$HF_LONGSPEC_USR_SHARE/pack_manifest.json" ] || { echo "carry .carry/usr_share_eval first"; exit 3; }
mkdir -p "$OUT/multilingual"
for draft in embedded ${CANDIDATE:-}; do
  name=$(basename "$draft")
  timeout ${LIMIT:-240} python benchmarks/tau_curve.py --out "$OUT/multilingual/$name" --draft "$draft" \
    --lengths 2048 4096 8000 --kinds multilingual --prompts 3 --new-tokens 128 --device cuda --dtype bfloat16 \
    --no-compile > "$OUT/multilingual/$name.log" 2>&1
  python benchmarks/device/tau_summary.py "$OUT/multilingual/$name/tau_curve.json" "$name" || tail -3 "$OUT/multilingual/$name.log"
done
