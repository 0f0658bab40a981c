"""Where a LongSpec round's GPU time goes, beside one compiled vanilla static step (for the Fast
LongSpec goal at batch 1: the round must cost <= tau / 2 vanilla steps for a 2x speedup).

    PYTHONPATH=src python benchmarks/profile_round.py --out DIR [--length 8000] [--rounds 20]
    PYTHONPATH=src python benchmarks/profile_round.py --out DIR --quick      # CPU smoke run

On the embedded SmolLM2 (bf16 on CUDA) and its shipped draft, with one eval-split code prompt:
- LongSpec: one generate() call builds and warms the decoder (compiled, as generate runs it); then
  ``--rounds`` rounds are run phase by phase (draft tree, verification forward, accept, commit),
  each phase in a ``record_function`` range, without graph replay so that every kernel launch is
  visible (the kernels are the ones the captured graph replays; the launch gaps are not).
- vanilla: ``generate(cache_implementation="static")`` of 33 tokens under the same profiler.
Writes ``profile_round.json`` (per phase: GPU ms per round; top kernels by GPU time) and
``profile_round.md`` (the same as tables).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.workloads import build_workloads
from hf_longspec.embedded import load_embedded_draft, load_embedded_target
from hf_longspec.generation.acceptance import greedy_accept

PHASES = ("draft", "verify", "accept", "commit")


def device_time_us(event, cuda: bool) -> float:
    """An event's self GPU time (self CPU time on a CPU-only run), whatever this torch release calls it."""
    names = ("self_device_time_total", "self_cuda_time_total") if cuda else ("self_cpu_time_total",)
    for name in names:
        if hasattr(event, name):
            return float(getattr(event, name))
    return 0.0


def top_kernels(prof, count: int, per: int, cuda: bool) -> list[dict]:
    events = [e for e in prof.key_averages() if not e.key.startswith(PHASES) and device_time_us(e, cuda) > 0]
    events.sort(key=lambda e: device_time_us(e, cuda), reverse=True)
    return [{"name": e.key[:90], "calls_per_unit": e.count / per, "ms_per_unit": device_time_us(e, cuda) / 1000 / per}
            for e in events[:count]]


def phase_times(prof, rounds: int) -> dict:
    """GPU (device) time inside each phase range, per round."""
    totals = {}
    for event in prof.key_averages():
        if event.key in PHASES:
            device = getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0.0)
            totals[event.key] = {"device_ms_per_round": float(device) / 1000 / rounds,
                                 "cpu_ms_per_round": float(event.cpu_time_total) / 1000 / rounds}
    return totals


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--length", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    device = "cpu" if args.quick or not torch.cuda.is_available() else "cuda"
    length = args.length or (256 if device == "cpu" else 8000)
    rounds = 3 if device == "cpu" else args.rounds
    target, tokenizer = load_embedded_target(device=device)
    draft = load_embedded_draft(target)
    target.generation_config.eos_token_id = None
    target.generation_config.pad_token_id = 0
    (workload,) = build_workloads(tokenizer, [length], ["code"], 1, seed=0)
    ids = torch.tensor([workload.input_ids], device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])

    # LongSpec: generate() builds, compiles and warms the pooled decoder; then rounds phase by phase
    target.generate(ids, assistant_model=draft, max_new_tokens=rounds * 6 + 8, do_sample=False)
    tau = draft.last_stats.tau
    (decoder,) = [d for pool in draft.__dict__["_longspec_decoders"].values() for d in pool]
    with torch.no_grad():
        decoder.cache.lengths.fill_(length)  # the prompt's KV is still in place from the call above
        with profile(activities=activities) as prof:
            for _ in range(rounds):
                with record_function("draft"):
                    decoder._draft_greedy()
                with record_function("verify"):
                    logits = decoder._verify()
                with record_function("accept"):
                    paths = greedy_accept(decoder.layout, decoder.tree, logits)
                    roots = paths.emitted.gather(1, (paths.accepted - 1)[:, None])[:, 0]
                with record_function("commit"):
                    decoder._commit(paths.path_nodes, paths.accepted, roots)
            if device == "cuda":
                torch.cuda.synchronize()
    longspec = {"phases": phase_times(prof, rounds), "top_kernels": top_kernels(prof, args.top, rounds, device == "cuda"),
                "tau_of_the_warm_up_call": tau, "tree_widths": list(decoder.layout.widths)}

    # vanilla static: the step transformers compiles; 33 new tokens = 32 steps after the prefill
    target.set_attn_implementation("sdpa")
    options = dict(max_new_tokens=33, min_new_tokens=33, do_sample=False, cache_implementation="static",
                   max_cache_len=length + 64)
    target.generate(ids, **options)  # compile
    with profile(activities=activities) as prof:
        target.generate(ids, **options)
        if device == "cuda":
            torch.cuda.synchronize()
    vanilla = {"top_kernels": top_kernels(prof, args.top, 32, device == "cuda"), "note": "per step = per (33-token call / 32); "
               "the prefill's kernels are included once, spread over the 32 steps"}

    result = {"machine": machine_info(torch.device(device), sys.argv), "length": length, "rounds": rounds,
              "longspec": longspec, "vanilla_static": vanilla}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile_round.json").write_text(json.dumps(result, indent=1, default=str))
    lines = [f"LongSpec round at {length} tokens ({device}), tree {longspec['tree_widths']}, per round:", "",
             "| phase | GPU ms | CPU ms |", "|---|---|---|"]
    for phase in PHASES:
        t = longspec["phases"].get(phase, {})
        lines.append(f"| {phase} | {t.get('device_ms_per_round', 0):.3f} | {t.get('cpu_ms_per_round', 0):.3f} |")
    for title, table, unit in (("LongSpec kernels", longspec["top_kernels"], "round"),
                               ("vanilla static kernels", vanilla["top_kernels"], "step")):
        lines += ["", f"{title} (per {unit}):", "", f"| kernel | calls per {unit} | ms per {unit} |", "|---|---|---|"]
        lines += [f"| `{k['name']}` | {k['calls_per_unit']:.1f} | {k['ms_per_unit']:.4f} |" for k in table]
    (out / "profile_round.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
