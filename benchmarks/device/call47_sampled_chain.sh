#!/usr/bin/env bash
# Does a lookup chain pay in sampled calls on the GPU (issue 12; the forty-seventh session's plan)? On the CPU a
# 32-token chain raised sampled tau from 2.58 to 3.41 (forty-sixth session); a sampled call has no chain by
# default because its rounds cost more with one. Two parts, each one device call:
#   PART=round (no carry, no model; ~8 min): the captured round part by part, sampled with and without the chain,
#     the chain's walk with each depth's tries compiled (the code) and compiled whole (the guard lifted), and
#     greedy and sampled rounds with their walk and commit compiled too (both eager in the round today).
#   PART=end (after parking a, a2..a5; carry [".carry/b"]): the CUDA sampling tests, then end to end against vanilla
#     static sampled (compiled, same run) with the guard lifted for the chain (benchmarks/whole_walk_beside_chain.py).
set -u
START=$SECONDS
case "${PART:-round}" in
  round)
    PYTHONPATH=src timeout -k 5 560 python benchmarks/sampled_round_cost.py --out "$OUT/rc" --length 8000 --repeats 50 \
      --variants "greedy (tree + 32-token chain)" "greedy, walk and commit compiled" "sampled, walk compiled whole" \
      "sampled, walk whole and commit compiled" "sampled + 32-token chain, each depth's tries compiled" \
      "sampled + 32-token chain, walk compiled whole" "sampled + 32-token chain, walk whole and commit compiled"
    ;;
  end)
    source benchmarks/device/setup_model.sh || exit $?
    HF_LONGSPEC_TEST_DEVICE=cuda PYTHONPATH=/tmp/site:src timeout -k 5 240 python -m pytest -q -p no:logging \
      tests/test_sampled_accept.py tests/test_sampling.py > "$OUT/cuda_tests.log" 2>&1
    tail -n 5 "$OUT/cuda_tests.log"
    # the forty-eighth session ran this through benchmarks/whole_walk_beside_chain.py (the chain's guard lifted for
    # the process); the guard and the runner went after it, so decode_bench alone now runs what it ran
    PYTHONPATH=/tmp/site:src timeout -k 5 $((560 - (SECONDS - START))) python benchmarks/decode_bench.py --out "$OUT/chain" --lengths 4096 8000 --prompts 3 --repeats 1 \
      --methods vanilla_static_sampled longspec_sampled_lookup0 longspec_sampled_lookup32 --fp32-prompts 0
    ;;
esac
echo "total $((SECONDS - START)) s"
