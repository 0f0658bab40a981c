#!/usr/bin/env bash
# One-GPU call 1 (carry [".carry/a"]): park part a of the embedded model; the attention kernel tests
# compiled on the GPU; the 8B-shape round profile at 32k (row-tile and top-k variants); the 8B-shape
# scale study (round vs compiled static vanilla step, bytes floors) at 8k, 32k and 128k.
# SKIP_PROFILE=1 leaves the profile out.
set -u
mkdir -p /tmp/m && cp .carry/a/* /tmp/m/
export PYTHONPATH=src PYTHONUNBUFFERED=1
timeout 120 python -m pytest -q -p no:cacheprovider tests/test_fused_mask_attn.py tests/test_hybrid_attention.py \
  > "$OUT/kernel_tests.txt" 2>&1; tail -3 "$OUT/kernel_tests.txt"
[ -n "${SKIP_PROFILE:-}" ] || timeout 120 python benchmarks/profile_round.py --out "$OUT/p8b" --shape llama8b --length 32768 > "$OUT/p8b.log" 2>&1
[ -n "${SKIP_PROFILE:-}" ] || python - "$OUT/p8b/profile_llama8b_32768.json" <<'PY' || tail -5 "$OUT/p8b.log"
import json, sys
r = json.load(open(sys.argv[1]))
print("8B 32k graph", {k: round(v, 3) for k, v in r["graph"].items()}, "variants", {k: round(v, 3) for k, v in r["variants"].items()})
for name, phase in r["phases"].items():
    print(name, phase["kernels_per_round"], [(k["name"][:40], round(k["ms_per_unit"], 3)) for k in phase["top_kernels"][:8]])
PY
# SCALE_ARGS adds options, e.g. --trees 4-16-12 2-4-4-3-3 (rows per tree shape at each context)
timeout ${SCALE_LIMIT:-330} python benchmarks/scale_study.py --out "$OUT/scale" --contexts 8192 32768 130560 \
  --vanilla-contexts 8192 32768 ${SCALE_ARGS:-} 2>&1 | grep -v -i warn | grep "^|"
