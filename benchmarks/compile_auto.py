"""What a user's first calls cost with each compile choice: one choice per fresh process (run each with fresh
inductor and Triton cache folders for a cold machine), its calls timed one by one.

    PYTHONPATH=src python benchmarks/compile_auto.py --out DIR --compile auto [--calls 3] [--prompt-tokens 4000]
        [--new-tokens 128] [--dtype bfloat16] [--price SECONDS] [--check-exact] [--top-k K]
    PYTHONPATH=src python benchmarks/compile_auto.py --out DIR --compile auto --device cpu --prompt-tokens 300 \
        --new-tokens 16 --calls 2 --price 0 --dtype float32 --check-exact  # smoke

Choices: ``vanilla`` (generate with ``cache_implementation="static"``, which transformers compiles: the baseline
of record), and LongSpec's ``longspec_compile`` True (the default on CUDA), False and "auto" (ski rental:
generation/compile_policy.py). SmolLM2's shape with random weights (a first call's compile and a round's cost do
not depend on the weights) and the shipped draft; a random target never stops early, so every call makes its
new tokens, but it soon repeats itself and the chain then takes most of them (tau 16-30 on an H200: few rounds
per call, so its calls' times are not a measure of the round).
``--price S`` sets compile_policy's prices of compiling to S seconds, so that "auto" switches in the middle of a
call instead of after about two minutes of rounds. ``--check-exact`` also runs vanilla greedy generate of the
same prompts (eager, dynamic cache) and compares each call's tokens (use float32: in bf16 a verification over
many rows may round apart from one-token decoding). ``--top-k K`` samples (``do_sample=True, top_k=K``): the
sampled round, whose walk "auto" compiles too; with K = 1 its tokens are greedy's, so ``--check-exact`` still
compares them with vanilla greedy. ``--seeded`` gives every call the same prompt and seeds each alike
(transformers' ``set_seed(0)``), and says whether each call's tokens are the first call's: with ``--top-k`` above 1 (or
0: no top-k), whether a seeded sampled call repeats itself whether its rounds ran cold, warm or just compiled.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from transformers import set_seed

from hf_longspec import LongSpecDraftModel
from hf_longspec.bench.machine import machine_info
from hf_longspec.demo import timed
from hf_longspec.generation import compile_policy

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sampled_round_cost import DRAFT, SMOLLM2  # noqa: E402
from scale_study import random_target  # noqa: E402

CHOICES = {"vanilla": None, "True": True, "False": False, "auto": "auto"}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--compile", choices=list(CHOICES), required=True)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--prompt-tokens", type=int, default=4000)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--price", type=float, default=None, help="compile_policy's prices of compiling, in seconds")
    parser.add_argument("--check-exact", action="store_true")
    parser.add_argument("--top-k", type=int, default=None, help="sample with top_k=K (1: greedy's tokens; 0: no top-k)")
    parser.add_argument("--seeded", action="store_true", help="one prompt, each call seeded alike: tokens repeat?")
    args = parser.parse_args(argv)
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    if args.price is not None:
        compile_policy.COMPILE_ALL_SECONDS = compile_policy.COMPILE_DRAFTING_SECONDS = args.price
    target = random_target(SMOLLM2, device, dtype)
    draft = LongSpecDraftModel.from_pretrained(str(DRAFT), dtype=dtype).to(device).eval().bind(target)
    generator = torch.Generator().manual_seed(0)
    common = dict(max_new_tokens=args.new_tokens, do_sample=False)
    asked = common if args.top_k is None else dict(common, do_sample=True, top_k=args.top_k)
    rows, first_tokens = [], None
    for call in range(args.calls):
        if call == 0 or not args.seeded:
            ids = torch.randint(0, SMOLLM2["vocab_size"], (1, args.prompt_tokens), generator=generator).to(device)
        if args.seeded:
            set_seed(0)
        if args.compile == "vanilla":
            out, seconds = timed(lambda: target.generate(ids, cache_implementation="static", **asked), device)
            row = {"call": call, "seconds": seconds}
        else:
            out, seconds = timed(lambda: target.generate(ids, assistant_model=draft, longspec_compile=CHOICES[args.compile],
                                                         **asked), device)
            stats = draft.last_stats
            row = {"call": call, "seconds": seconds, "rounds": stats.rounds, "tau": stats.tau,
                   "compiled": stats.compiled, "verify_compiled": stats.verify_compiled,
                   "compiled_during_call": stats.compiled_during_call, "cuda_graphs": stats.cuda_graphs,
                   "warmup_seconds": stats.warmup_seconds, "capture_seconds": stats.capture_seconds}
        row["new_tokens"] = out.shape[1] - ids.shape[1]
        if args.seeded:
            first_tokens = out if first_tokens is None else first_tokens
            row["same_tokens_as_first_call"] = torch.equal(out, first_tokens)
        if args.check_exact:
            row["identical_to_vanilla"] = torch.equal(out, target.generate(ids, **common))
        rows.append(row)
        print(json.dumps(row), flush=True)
    result = {"machine": machine_info(device, sys.argv), "compile": args.compile, "dtype": args.dtype,
              "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens, "price": args.price,
              "top_k": args.top_k, "seeded": args.seeded,
              "prices": {"compile_all_seconds": compile_policy.COMPILE_ALL_SECONDS,
                         "compile_drafting_seconds": compile_policy.COMPILE_DRAFTING_SECONDS,
                         "saved_by_all": compile_policy.SAVED_BY_ALL},
              "calls": rows}
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"compile_auto_{args.compile}.json").write_text(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
