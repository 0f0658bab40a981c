#!/usr/bin/env bash
# The greedy path and the main job at the code as landed since the forty-eighth session (the round calls
# greedy_accept and its commit directly again; sampled calls verify the chain; the main job times vanilla with the
# static cache, both calls warmed up at their shapes on an accelerator): one call after parking a, a2..a5 (carry
# [".carry/b"]). The README's main job on the GPU, the captured round's exactness on tiny random Llamas, then the
# greedy default end to end against vanilla static (compiled, same run) at 8000 tokens with its float32 check.
# TOTAL=SECONDS (default 560) caps the whole call; decode_bench gets what is left.
set -u
START=$SECONDS
source benchmarks/device/setup_model.sh || exit $?
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1
timeout -k 5 200 python -m hf_longspec.cli run > "$OUT/main_job.txt" 2>&1; grep -v -i "warn\|Loading\|Convert" "$OUT/main_job.txt" | tail -n 9
timeout -k 5 90 python benchmarks/gpu_round_check.py > "$OUT/round_check.txt" 2>&1; tail -n 6 "$OUT/round_check.txt"
timeout -k 5 $((${TOTAL:-560} - (SECONDS - START))) python benchmarks/decode_bench.py --out "$OUT/greedy" --lengths 8000 \
  --prompts 3 --repeats 1 --methods vanilla_static longspec --fp32-prompts 1
echo "total $((SECONDS - START)) s"
