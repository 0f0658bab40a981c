"""Where a LongSpec round's GPU time goes, beside one compiled vanilla static step (for the Fast
LongSpec goal at batch 1: the round must cost <= tau / 2 vanilla steps for a 2x speedup).

    PYTHONPATH=src python benchmarks/profile_round.py --out DIR [--length 8000] [--rounds 20] [--tree-widths 8 32 32 32 32] \
        [--cross-attention-window 2048]
    PYTHONPATH=src python benchmarks/profile_round.py --out DIR --shape llama8b --length 32768
    PYTHONPATH=src python benchmarks/profile_round.py --out DIR --quick      # CPU smoke run

Besides the per-phase profile below, each phase (draft, verify, whole round) is captured as a CUDA
graph and its replay timed, so launch gaps show as (graph time - summed kernel time). With
``--shape llama8b`` (random bf16 weights, random KV up to ``--length``) the vanilla profile is
skipped and the target's GEMM shapes are timed alone at 1 and N rows against the copy bandwidth.

On the embedded SmolLM2 (bf16 on CUDA) and its shipped draft, with one eval-split code prompt:
- LongSpec: one generate() call builds and warms the decoder (compiled, as generate runs it); then
  each phase (draft tree, verification forward, accept + commit) is profiled alone for ``--rounds``
  repetitions, without graph replay so that every kernel launch is visible (the kernels are the
  ones the captured graph replays; the launch gaps are not). The replay times come from
  ``scale_study.phase_replay_ms``, the decoder of the 8B shape from ``scale_study.filled_decoder``.
- vanilla: ``generate(cache_implementation="static")`` of 33 tokens under the same profiler.
Writes ``profile_round.json`` (per phase: GPU ms per round; top kernels by GPU time) and
``profile_round.md`` (the same as tables).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.workloads import build_workloads
from hf_longspec.embedded import load_embedded_draft, load_embedded_target
from hf_longspec.generation.acceptance import greedy_accept

PHASES = ("draft", "verify", "accept_commit")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_study import LLAMA_8B, TINY, capture, cuda_time, filled_decoder, phase_replay_ms, random_target  # noqa: E402,E501


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


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def kernel_count(prof, cuda: bool) -> float:
    """Device kernels launched inside the profile (CPU ops on a CPU-only run)."""
    if not cuda:
        return 0.0
    return float(sum(e.count for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA))


def variants(decoder, length: int, device, repeats: int = 20) -> dict:
    """Choices measured side by side, each by replaying the verification forward: the split-KV row tile
    cap (a cap of 128 still drops to 64 for small launches of more than 128 rows, see prefix_splitkv),
    and the split kernel's (BLOCK_N, num_warps, num_stages)."""
    import hf_longspec.kernels.prefix_splitkv as splitkv

    result = {}
    if device.type != "cuda":
        return result
    kept = splitkv._MAX_ROW_TILE
    with torch.no_grad():
        for tile in (128, 64):
            splitkv._MAX_ROW_TILE = tile
            decoder.cache.lengths.fill_(length)
            replay = capture(lambda: decoder._verify(), device)
            result[f"verify_graph_ms_row_tile_{tile}"] = 1000 * sorted(cuda_time(replay, repeats, device))[repeats // 2]
        splitkv._MAX_ROW_TILE = kept
        # the split kernel's key block, warps and pipeline stages (None: the library's choice); set by
        # swapping the module's default_tiles for this benchmark only (a model forward passes no tiles)
        default_tiles = splitkv.default_tiles
        for launch in (None, (128, 8, 2), (64, 4, 3), (64, 8, 4), (32, 4, 4)):
            splitkv.default_tiles = default_tiles if launch is None else (
                lambda *args, fixed=launch: default_tiles(*args)._replace(
                    block_n=fixed[0], num_warps=fixed[1], num_stages=fixed[2]))
            decoder.cache.lengths.fill_(length)
            try:
                replay = capture(lambda: decoder._verify(), device)
                ms = 1000 * sorted(cuda_time(replay, repeats, device))[repeats // 2]
            except Exception as error:  # noqa: BLE001 - a config that does not fit shared memory
                ms = f"failed: {type(error).__name__}"
            result["verify_graph_ms_launch_" + ("default" if launch is None else "-".join(map(str, launch)))] = ms
        splitkv.default_tiles = default_tiles
    return result


def gemm_table(config, rows: int, device, repeats: int = 20) -> list[dict]:
    """The target layer's GEMMs (and LM head) alone, at 1 and ``rows`` rows, as graph replays: achieved
    weight-read bandwidth, to tell whether a verification forward is bound by its GEMMs' efficiency."""
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    kv = config["num_key_value_heads"] * hidden // config["num_attention_heads"]
    shapes = {"q/o": (hidden, hidden), "k/v": (hidden, kv), "qkv fused": (hidden, hidden + 2 * kv),
              "gate/up": (hidden, inter), "gate+up fused": (hidden, 2 * inter), "down": (inter, hidden),
              "lm_head": (hidden, vocab)}
    table = []
    for name, (k, n) in shapes.items():
        weight = torch.randn(n, k, device=device, dtype=torch.bfloat16)
        for m in (1, rows):
            x = torch.randn(m, k, device=device, dtype=torch.bfloat16)
            replay = capture(lambda: torch.nn.functional.linear(x, weight), device)
            ms = 1000 * sorted(cuda_time(replay, repeats, device))[repeats // 2]
            table.append({"gemm": name, "rows": m, "k": k, "n": n, "ms": ms,
                          "weight_GB_per_s": weight.numel() * 2 / (ms / 1000) / 1e9})
        del weight
    return table


def build_llama8b(length: int, device):
    """A random bf16 Llama-3.1-8B-shape target (a tiny Llama on the CPU) with a random draft, and a
    decoder whose cache holds random K/V up to ``length`` (only cost matters)."""
    from hf_longspec import LongSpecDraftModel
    from hf_longspec.generation import TreeLayout

    cuda = device.type == "cuda"
    shape = LLAMA_8B if cuda else TINY
    target = random_target(shape, device, torch.bfloat16 if cuda else torch.float32)
    draft = LongSpecDraftModel.from_target(target).eval()
    layout = TreeLayout.plan(draft.config.tree_widths, draft.config.tree_max_nodes, shape["vocab_size"])
    return filled_decoder(target, draft, layout, length, device)


def profile_phases(decoder, length: int, rounds: int, top: int, device) -> dict:
    """Each phase profiled alone (eager, so every launch shows): GPU ms, kernels and top kernels per round."""
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    state = {}

    def draft():
        decoder._draft_greedy()

    def verify():
        state["logits"] = decoder._verify()

    def accept_commit():  # on the last verification's logits, the context reset after every commit
        paths = greedy_accept(decoder.layout, decoder.tree, state["logits"])
        roots = paths.emitted.gather(1, (paths.accepted - 1)[:, None])[:, 0]
        decoder._commit(paths.path_nodes, paths.accepted, roots)
        decoder.cache.lengths.fill_(length)

    phases = {}
    with torch.no_grad():
        decoder.cache.lengths.fill_(length)
        verify()  # logits for accept_commit, outside every profile
        for name, fn in (("draft", draft), ("verify", verify), ("accept_commit", accept_commit)):
            with profile(activities=activities) as prof:
                for _ in range(rounds):
                    with record_function(name):
                        fn()
                if cuda:
                    torch.cuda.synchronize()
            kernels = top_kernels(prof, top, rounds, cuda)
            timed = phase_times(prof, rounds).get(name, {})
            phases[name] = {**timed, "kernels_per_round": kernel_count(prof, cuda) / rounds, "top_kernels": kernels}
    return phases


def main_llama8b(args, device) -> dict:
    decoder = build_llama8b(args.length or 32768, device)
    length = int(decoder.cache.lengths[0])
    result = {"shape": "llama8b", "length": length, "tree_widths": list(decoder.layout.widths),
              "graph": phase_replay_ms(decoder, length, 20, device),
              "variants": variants(decoder, length, device),
              "phases": profile_phases(decoder, length, 5, args.top, device)}
    if device.type == "cuda":
        result["gemms"] = gemm_table(LLAMA_8B, decoder.layout.num_nodes, device)
    return result


def warmed_decoder(target, draft, ids, rounds: int):
    """The decoder one generate() call builds, compiles and warms for ``draft`` (the only one in its pool:
    the pool is emptied first), with that call's tau."""
    draft.__dict__.get("_longspec_decoders", {}).clear()
    target.generate(ids, assistant_model=draft, max_new_tokens=rounds * 6 + 8, do_sample=False)
    (decoder,) = [d for pool in draft.__dict__["_longspec_decoders"].values() for d in pool]
    return decoder, draft.last_stats.tau


def longspec_round(target, draft, ids, length: int, rounds: int, device) -> dict:
    """``draft``'s phases as graph replays, and the whole call's time per round (a 129-token call less a
    1-token call)."""
    decoder, _ = warmed_decoder(target, draft, ids, rounds)
    return {"graph": phase_replay_ms(decoder, length, 20, torch.device(device)),
            **generate_per_round(target, draft, ids, device)}


def generate_per_round(target, draft, ids, device) -> dict:
    """The whole generate() call per round: (129-token call - 1-token call) / rounds. Both calls run once
    untimed first, so that neither timed call is the first of its kind (the two lengths fall in different
    cache-size buckets). Without this warm-up, the 2026-12-03 run read 1.03 ms per round against a
    3.5 ms captured round, after the profiles and the tile variants had run."""
    def call(new):
        target.generate(ids, assistant_model=draft, max_new_tokens=new, min_new_tokens=new, do_sample=False)

    for new in (1, 129):
        call(new)
    walls = {}
    for new in (1, 129):
        sync(device)
        begin = time.perf_counter()
        call(new)
        sync(device)
        walls[new] = time.perf_counter() - begin
    return {"generate_rounds": draft.last_stats.rounds, "generate_tau": draft.last_stats.tau,
            "generate_ms_per_round": 1000 * (walls[129] - walls[1]) / max(1, draft.last_stats.rounds)}


def grafted_rounds(target, draft, ids, extra: list[int], length: int, rounds: int, device) -> dict:
    """The round of a draft that also reads target layers ``extra`` (issue 12), beside the shipped draft's
    in the same process. The blocks are grafted with zero output columns, so the grafted draft proposes
    the same trees (same tau) and only the round's cost differs."""
    from hf_longspec.training.widen import add_target_layers

    grafted = add_target_layers(load_embedded_draft(target), extra).to(device=device, dtype=draft.dtype)
    return {"extra_target_layer_indices": extra,
            "shipped": longspec_round(target, draft, ids, length, rounds, device),
            "grafted": longspec_round(target, grafted, ids, length, rounds, device)}


def windowed_rounds(target, draft, ids, window: int, length: int, rounds: int, device) -> dict:
    """The round of the shipped draft reading only the anchors and the newest `window` target entries
    (config.cross_attention_window: the split-KV kernel reads them in place), beside the whole reading in the
    same process. The trees differ (so do the taus); the per-round times are what this compares."""
    windowed = load_embedded_draft(target).to(device=device, dtype=draft.dtype)
    windowed.config.cross_attention_window = window
    return {"cross_attention_window": window,
            "whole": longspec_round(target, draft, ids, length, rounds, device),
            "windowed": longspec_round(target, windowed, ids, length, rounds, device)}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--length", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--shape", choices=("smollm2", "llama8b"), default="smollm2")
    parser.add_argument("--extra-target-layer-indices", type=int, nargs="+", default=None,
                        help="also time the round of the shipped draft grafted to read these target layers too")
    parser.add_argument("--cross-attention-window", type=int, default=None, metavar="W",
                        help="also time the round of the shipped draft reading only the anchors and the newest W "
                             "target entries, beside its whole reading")
    parser.add_argument("--tree-widths", type=int, nargs="+", default=None,
                        help="profile this tree instead of the draft's (every generate() call of the run; "
                             "the twenty-ninth session: a wider tree's round cost 8%% more)")
    args = parser.parse_args(argv)
    device = "cpu" if args.quick or not torch.cuda.is_available() else "cuda"
    if args.shape == "llama8b":
        result = {"machine": machine_info(torch.device(device), sys.argv), **main_llama8b(args, torch.device(device))}
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"profile_llama8b_{result['length']}.json").write_text(json.dumps(result, indent=1, default=str))
        print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1, default=str))
        return
    length = args.length or (256 if device == "cpu" else 8000)
    rounds = 3 if device == "cpu" else args.rounds
    target, tokenizer = load_embedded_target(device=device)
    draft = load_embedded_draft(target)
    target.generation_config.eos_token_id = None
    target.generation_config.pad_token_id = 0
    if args.tree_widths:  # a generation-config option, so that every generate() below drafts this tree
        target.generation_config.longspec_tree_widths = list(args.tree_widths)
    (workload,) = build_workloads(tokenizer, [length], ["code"], 1, seed=0)
    ids = torch.tensor([workload.input_ids], device=device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])

    # LongSpec: generate() builds, compiles and warms the pooled decoder; then each phase alone
    decoder, tau = warmed_decoder(target, draft, ids, rounds)
    cuda = torch.device(device)
    per_phase = profile_phases(decoder, length, rounds, args.top, cuda)  # the prompt's KV is still in place
    longspec = {"per_phase": per_phase,
                "kernels_per_round": sum(phase["kernels_per_round"] for phase in per_phase.values()),
                "graph": phase_replay_ms(decoder, length, 20, cuda),
                "variants": variants(decoder, length, cuda),
                "tau_of_the_warm_up_call": tau, "tree_widths": list(decoder.layout.widths)}
    longspec.update(generate_per_round(target, draft, ids, device))

    if args.cross_attention_window:
        longspec["windowed"] = windowed_rounds(target, draft, ids, args.cross_attention_window, length, rounds, device)
    if args.extra_target_layer_indices:
        longspec["grafted"] = grafted_rounds(target, draft, ids, args.extra_target_layer_indices, length,
                                             rounds, device)

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
               "the prefill's kernels are included once, spread over the 32 steps",
               "kernels_per_step": kernel_count(prof, device == "cuda") / 32}
    walls = {}
    for new in (1, 33):
        sync(device)
        begin = time.perf_counter()
        target.generate(ids, **{**options, "max_new_tokens": new, "min_new_tokens": new})
        sync(device)
        walls[new] = time.perf_counter() - begin
    vanilla["step_ms"] = 1000 * (walls[33] - walls[1]) / 32

    result = {"machine": machine_info(torch.device(device), sys.argv), "length": length, "rounds": rounds,
              "longspec": longspec, "vanilla_static": vanilla}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "profile_round.json").write_text(json.dumps(result, indent=1, default=str))
    graph = longspec["graph"]
    lines = [f"LongSpec round at {length} tokens ({device}), tree {longspec['tree_widths']}: graph replay draft "
             f"{graph['draft_ms']:.3f} ms, verify {graph['verify_forward_ms']:.3f} ms, round {graph['round_ms']:.3f} ms; "
             f"generate() {longspec['generate_ms_per_round']:.3f} ms per round; vanilla static step "
             f"{vanilla['step_ms']:.3f} ms; kernels per round {longspec['kernels_per_round']:.0f}, per vanilla step "
             f"{vanilla['kernels_per_step']:.0f}", "", "| phase | GPU ms (eager, profiled) | kernels |", "|---|---|---|"]
    for phase, t in longspec["per_phase"].items():
        lines.append(f"| {phase} | {t.get('device_ms_per_round', 0):.3f} | {t['kernels_per_round']:.0f} |")
    tables = [(f"LongSpec {phase} kernels", t["top_kernels"], "round") for phase, t in longspec["per_phase"].items()]
    for title, table, unit in tables + [("vanilla static kernels", vanilla["top_kernels"], "step")]:
        lines += ["", f"{title} (per {unit}):", "", f"| kernel | calls per {unit} | ms per {unit} |", "|---|---|---|"]
        lines += [f"| `{k['name']}` | {k['calls_per_unit']:.1f} | {k['ms_per_unit']:.4f} |" for k in table]
    comparisons = [("grafted", ("shipped", "grafted"), lambda both: f"Reading target layers "
                    f"{both['extra_target_layer_indices']} too (grafted, same trees), side by side:"),
                   ("windowed", ("whole", "windowed"), lambda both: f"Reading the anchors and the newest "
                    f"{both['cross_attention_window']} entries (cross_attention_window; other trees), side by side:")]
    for key, names, title in comparisons:
        if key not in longspec:
            continue
        both = longspec[key]
        lines += ["", title(both), "", "| draft | draft ms | verify ms | round ms (graph) | generate() ms per round | tau |",
                  "|---|---|---|---|---|---|"]
        for name in names:
            g = both[name]["graph"]
            lines.append(f"| {name} | {g['draft_ms']:.3f} | {g['verify_forward_ms']:.3f} | {g['round_ms']:.3f} | "
                         f"{both[name]['generate_ms_per_round']:.3f} | {both[name]['generate_tau']:.2f} |")
    (out / "profile_round.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
