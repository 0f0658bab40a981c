#!/usr/bin/env bash
# GPU call (carry [".carry/b"], right after a call that parked part a; eighth session): sampled rounds on
# the device. The walk's law on CUDA (captured, replayed), the generate() laws through captured and
# compiled rounds, then sampled decode speed against vanilla static sampled, the same run.
# SAMPLING_LAWS=0 skips the generate() laws (a second measuring call). Session 8's run measured
# longspec_sampled_lookup0 where this now names lookup32: the sampled default lost its chain after it.
set -u
source benchmarks/device/setup_model.sh
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
if [ "${SAMPLING_LAWS:-1}" = 1 ]; then
  timeout 90 python -m pytest -q -p no:cacheprovider tests/test_sampled_accept.py 2>&1 | tail -5 \
    | tee "$OUT/sampled_accept_cuda.txt"
  HF_LONGSPEC_TEST_DEVICE=cuda timeout 260 python -m pytest -q -p no:cacheprovider -x tests/test_sampling.py \
    -k "depth_3 or lookup_chain" --durations=3 2>&1 | tail -8 | tee "$OUT/sampling_laws_cuda.txt"
fi
timeout "${DECODE_TIMEOUT:-230}" python benchmarks/decode_bench.py --out "$OUT/decode_sampled" \
  --lengths ${LENGTHS:-4096 8000} --kinds code prose --prompts 1 --repeats 2 \
  --methods vanilla_static_sampled longspec_sampled longspec_sampled_lookup32 --fp32-prompts 0 2>&1 \
  | grep -v -i warn | tail -30 | tee "$OUT/decode_sampled_log.txt"
