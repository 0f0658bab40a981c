"""End-to-end decode speed on the embedded SmolLM2: LongSpec against the fastest vanilla a user runs.

    PYTHONPATH=src python benchmarks/decode_bench.py --out DIR [--lengths 4096 8000] [--prompts 3] [--repeats 2]
    ... --methods vanilla_static longspec --trees 4-16-12 4-8-8-8-8    # also LongSpec with other tree shapes
    ... --methods vanilla_static longspec --lookups 5 16               # also with prompt-lookup chains
    ... --methods vanilla_static longspec --drafts before=FOLDER       # also another draft, side by side
    ... --methods vanilla_static longspec --windows 2048               # also with a cross-attention window
    ... --methods vanilla_static longspec --chains 2                   # also with a second prompt-lookup chain
    ... --methods vanilla_static longspec --rounds-only                # also without plain steps (a CPU's default)
    ... --methods vanilla_static longspec --lookups 0 --rerank-leaves  # also with the tree's leaves re-ranked

Methods, all `target.generate(...)` greedy on the same loaded model, interleaved prompt by prompt
(the order flips on every repeat), medians with their spread:
- vanilla_static: `cache_implementation="static"` (transformers compiles the decoding step into
  CUDA graphs on its own): the baseline users pick for speed, and the one every speedup is over;
- vanilla_dynamic: the default DynamicCache (for reference only);
- longspec: `assistant_model=draft`, the shipped draft, default tree, captured rounds;
- longspec_uncompiled: the same with `longspec_compile=False` (what torch.compile buys);
- longspec_eager_rounds: no graphs, no compile (what both buy).
- longspec_tree_W1-W2-...: with ``--trees``, the shipped draft with ``longspec_tree_widths=[W1, W2, ...]``
  (the tree shape chosen on speed, not tau alone: a smaller tree accepts less but its round is cheaper);
- longspec_lookupK: with ``--lookups K ...``, the default tree plus a K-token prompt-lookup chain
  (``longspec_lookup_tokens=K``); the float32 check then runs each K too.
- longspec_windowW: with ``--windows W ...``, the shipped draft reading the target cache's anchors and its
  newest W entries (``longspec_cross_attention_window=W``; 0: every entry); the float32 check runs each W too.
- longspec_chainsC: with ``--chains C ...``, the shipped decoder verifying C prompt-lookup chains
  (``longspec_lookup_chains=C``); the float32 check runs each C too.
- longspec_rerank, longspec_lookupK_rerank, longspec_tree_SPEC_rerank: with ``--rerank-leaves``, the shipped
  decoder (and each ``--lookups`` K, each ``--trees`` SPEC) with ``longspec_rerank_leaves=True``: its leaves the
  best children of every drafted node.
- longspec_rounds_only: with ``--rounds-only``, the shipped decoder with ``longspec_plain_steps=False``: on a CPU,
  where the shipped config lets a call take plain steps while rounds lose (generation/plain_steps.py), what they
  change; elsewhere the same call as longspec.
- longspec_draft_NAME: with ``--drafts NAME=FOLDER ...``, another trained draft (its own config's tree and
  chain), so that a new draft and the one shipped before it are timed in one run, prompt by prompt
  (the float32 check runs the shipped draft only).
- vanilla_static_sampled, longspec_sampled, longspec_sampled_lookup0, longspec_sampled_lookup16 (the CPU
  round's chain length), longspec_sampled_lookup32: the
  same, sampled (temperature 0.8, each call seeded alike); the sampled LongSpec methods are compared
  with vanilla_static_sampled. From the eighth to the forty-seventh session a sampled call verified no chain by
  default (longspec_sampled was longspec_sampled_lookup0); since the forty-eighth it verifies the draft config's
  chain, as a greedy call does (on a GPU longspec_sampled is longspec_sampled_lookup32). longspec_sampled_unranked:
  sampled without re-ranking the tree's leaves (``longspec_rerank_leaves=False``), what re-ranking changes.
  longspec_sampled_rounds_only: sampled with ``longspec_plain_steps=False``: on a CPU, what the sampled call's plain
  steps (priced since the fifty-third session, timed before) change.
The two slow methods (vanilla_dynamic, longspec_eager_rounds) run in the first repeat only.
Decode rate = (new tokens - 1) / (call time - time to the first new token), the first token being
the prefill's. First calls (compile, capture, Triton builds) are timed and reported separately.
The bytes floor of a vanilla step is (weights + KV of the context) / measured copy bandwidth.
Also: in float32, LongSpec output must equal vanilla's; in bf16 the divergence rate of LongSpec vs
vanilla is reported next to that of vanilla static vs vanilla dynamic.
Every call's record names its prompt's token ids (`prompt_digest`): the prompts are the machine's local text,
which changes with the packages installed, so two runs' digests say whether they timed the same prompts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.probes import FirstTokenClock, copy_bandwidth
from hf_longspec.bench.traffic import kv_bytes_per_token, weight_bytes
from hf_longspec.bench.workloads import build_workloads
from hf_longspec.demo import load_draft_for
from hf_longspec.embedded import load_embedded_draft, load_embedded_target
from hf_longspec.evaluation import prompt_digest
from hf_longspec.publishing.weights_digest import model_weights_digest

SAMPLING_TEMPERATURE = 0.8
METHODS = {
    "vanilla_static": {"cache_implementation": "static"},
    "vanilla_dynamic": {},
    "longspec": {"assistant_model": True},
    "longspec_uncompiled": {"assistant_model": True, "longspec_compile": False},
    "longspec_eager_rounds": {"assistant_model": True, "longspec_cuda_graphs": False, "longspec_compile": False},
    "vanilla_static_sampled": {"cache_implementation": "static", "do_sample": True, "temperature": SAMPLING_TEMPERATURE},
    "longspec_sampled": {"assistant_model": True, "do_sample": True, "temperature": SAMPLING_TEMPERATURE},
    "longspec_sampled_lookup0": {"assistant_model": True, "do_sample": True, "temperature": SAMPLING_TEMPERATURE,
                                 "longspec_lookup_tokens": 0},
    "longspec_sampled_lookup16": {"assistant_model": True, "do_sample": True, "temperature": SAMPLING_TEMPERATURE,
                                  "longspec_lookup_tokens": 16},
    "longspec_sampled_lookup32": {"assistant_model": True, "do_sample": True, "temperature": SAMPLING_TEMPERATURE,
                                  "longspec_lookup_tokens": 32},
    "longspec_sampled_unranked": {"assistant_model": True, "do_sample": True, "temperature": SAMPLING_TEMPERATURE,
                                  "longspec_rerank_leaves": False},
    "longspec_sampled_rounds_only": {"assistant_model": True, "do_sample": True, "temperature": SAMPLING_TEMPERATURE,
                                     "longspec_plain_steps": False},
}
SAMPLED = ("vanilla_static_sampled", "longspec_sampled", "longspec_sampled_lookup0", "longspec_sampled_lookup16",
           "longspec_sampled_lookup32", "longspec_sampled_unranked", "longspec_sampled_rounds_only")
DEFAULT_METHODS = [m for m in METHODS if m not in SAMPLED]
VARIANTS = ("longspec_tree_", "longspec_lookup", "longspec_window", "longspec_chains", "longspec_sampled",
            "longspec_draft_", "longspec_rerank")  # rows of the second table
SLOW = ("vanilla_dynamic", "longspec_eager_rounds")  # run in the first repeat only (3-4 s a call)
# the H200 in earnest; the CPU only as a smoke run of this script (float32 there: bf16 matmuls crawl)
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float32


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def run(target, drafts, method, ids, new_tokens):
    """One timed generate() call; ``drafts`` maps a method's ``assistant_model`` (True: the shipped draft,
    or a ``--drafts`` name) to its loaded draft."""
    kwargs = dict(METHODS[method])
    which = kwargs.pop("assistant_model", False)
    if which:
        kwargs["assistant_model"] = draft = drafts[which]
    else:
        target.set_attn_implementation("sdpa")  # vanilla runs the target's own attention, untouched
    kwargs.setdefault("do_sample", False)
    if kwargs["do_sample"]:
        torch.manual_seed(0)
    clock = FirstTokenClock()
    sync()
    clock.begin()
    out = target.generate(ids, max_new_tokens=new_tokens, streamer=clock, **kwargs)
    sync()
    wall = time.perf_counter() - clock.start
    new = out[0, ids.shape[1]:].tolist()
    decode_s = wall - clock.prefill_seconds
    # the prompts are local text, which changes with the packages installed: the digest tells runs of other text apart
    record = {"method": method, "wall_s": wall, "prefill_s": clock.prefill_seconds, "new_tokens": len(new),
              "decode_tokens_per_s": (len(new) - 1) / decode_s, "tokens": new, "prompt_digest": prompt_digest(ids)}
    if "assistant_model" in kwargs:
        record["stats"] = draft.last_stats.as_dict()
    return record


def first_divergence(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def float32_exactness(workloads, args) -> list[dict]:
    """A float32 copy of the target (GGUF-loaded models refuse .float()): LongSpec must equal vanilla."""
    del_cache = torch.cuda.empty_cache if DEVICE == "cuda" else (lambda: None)
    target, _ = load_embedded_target(device=DEVICE, dtype=torch.float32)
    draft = load_embedded_draft(target)
    results = []
    for w in [w for w in workloads if w.length == min(args.lengths)][: args.fp32_prompts]:
        ids = torch.tensor([w.input_ids], device=DEVICE)
        target.set_attn_implementation("sdpa")
        reference = target.generate(ids, max_new_tokens=64, do_sample=False)
        variants = [{k: v for k, v in options.items() if k != "assistant_model"}  # the chains and windows, not trees
                    for name, options in variant_methods(args).items() if not name.startswith("longspec_tree_")]
        for options in [{}, {"longspec_compile": False}, {"longspec_cuda_graphs": False, "longspec_compile": False},
                        *variants]:
            out = target.generate(ids, assistant_model=draft, max_new_tokens=64, do_sample=False, **options)
            results.append({"prompt": w.name, "options": options, "identical": torch.equal(out, reference),
                            "tau": draft.last_stats.tau, "compiled": draft.last_stats.compiled,
                            "cuda_graphs": draft.last_stats.cuda_graphs})
            print("float32", results[-1], flush=True)
    del target, draft
    del_cache()
    return results


def variant_methods(args) -> dict[str, dict]:
    """The methods ``--lookups``, ``--windows``, ``--chains``, ``--rounds-only`` and ``--trees`` add: the shipped
    draft with one option changed."""
    methods = {}
    for tokens in args.lookups:
        methods[f"longspec_lookup{tokens}"] = {"assistant_model": True, "longspec_lookup_tokens": tokens}
    for window in args.windows:
        methods[f"longspec_window{window}"] = {"assistant_model": True, "longspec_cross_attention_window": window}
    for chains in args.chains:
        methods[f"longspec_chains{chains}"] = {"assistant_model": True, "longspec_lookup_chains": chains}
    if args.rounds_only:
        methods["longspec_rounds_only"] = {"assistant_model": True, "longspec_plain_steps": False}
    if args.rerank_leaves:
        methods["longspec_rerank"] = {"assistant_model": True, "longspec_rerank_leaves": True}
        for tokens in args.lookups:
            methods[f"longspec_lookup{tokens}_rerank"] = {**methods[f"longspec_lookup{tokens}"], "longspec_rerank_leaves": True}
    for spec in args.trees:
        widths, chain = parse_tree(spec)
        methods[f"longspec_tree_{spec}"] = {"assistant_model": True, "longspec_tree_widths": widths,
                                            **({} if chain is None else {"longspec_lookup_tokens": chain})}
        if args.rerank_leaves:
            methods[f"longspec_tree_{spec}_rerank"] = {**methods[f"longspec_tree_{spec}"], "longspec_rerank_leaves": True}
    return methods


def parse_tree(spec: str) -> tuple[list[int], int | None]:
    """'4-16-12' (the draft config's chain beside it) or '1-1-1-1+16' (a 16-token chain): widths, chain length."""
    widths, plus, chain = spec.partition("+")
    try:
        parsed = [int(w) for w in widths.split("-")], (int(chain) if plus else None)
    except ValueError:
        parsed = None
    if parsed is None or min(parsed[0]) < 1 or (parsed[1] is not None and parsed[1] < 0):
        raise ValueError(f"--trees {spec!r}: allowed: widths >= 1 joined by '-', and a chain length after '+' "
                         "(4-16-12, 1-1-1-1+16)")
    return parsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--lengths", type=int, nargs="+", default=[4096, 8000])
    parser.add_argument("--kinds", nargs="+", default=["code", "prose"])
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS)
    parser.add_argument("--fp32-prompts", type=int, default=2, help="float32 exactness check prompts (0: skip)")
    parser.add_argument("--trees", nargs="*", default=[],
                        help="extra tree shapes, widths joined by '-' (4-16-12), a chain length after '+' (1-1-1-1+16)")
    parser.add_argument("--drafts", nargs="*", default=[], metavar="NAME=FOLDER",
                        help="other trained drafts, each a method longspec_draft_NAME beside the shipped one")
    parser.add_argument("--lookups", type=int, nargs="*", default=[],
                        help="prompt-lookup chain lengths, each a method longspec_lookupK (the default tree plus the chain)")
    parser.add_argument("--windows", type=int, nargs="*", default=[], metavar="W",
                        help="cross-attention windows, each a method longspec_windowW (the shipped draft reading the "
                             "target cache's anchors and newest W entries; 0: every entry)")
    parser.add_argument("--chains", type=int, nargs="*", default=[], metavar="C",
                        help="prompt-lookup chains per round, each a method longspec_chainsC (longspec_lookup_chains)")
    parser.add_argument("--rounds-only", action="store_true",
                        help="also the method longspec_rounds_only: the shipped decoder without plain steps")
    parser.add_argument("--rerank-leaves", action="store_true",
                        help="also the methods longspec_rerank, longspec_lookupK_rerank (each --lookups K) and "
                             "longspec_tree_SPEC_rerank (each --trees SPEC): "
                             "longspec_rerank_leaves=True")
    args = parser.parse_args()
    for spec in args.trees:
        try:
            parse_tree(spec)
        except ValueError as error:
            parser.error(str(error))
    if any(window < 0 for window in args.windows):
        parser.error(f"--windows {args.windows}: allowed: ints >= 1 (newest entries read besides the anchors) or 0 (every entry)")
    others = [tuple(spec.split("=", 1)) for spec in args.drafts]
    for spec, pair in zip(args.drafts, others):
        if len(pair) != 2 or not pair[0] or not (Path(pair[1]) / "config.json").is_file():
            parser.error(f"--drafts {spec!r}: give NAME=FOLDER, FOLDER a saved draft (with config.json)")
    from hf_longspec.generation import loop
    # every tree shape (and draft) keeps its own compiled decoder: the pool must hold them all, or they recompile in turn
    variants = variant_methods(args)
    loop.IDLE_DECODERS_KEPT = max(loop.IDLE_DECODERS_KEPT, 2 + len(variants) + len(others))
    METHODS.update(variants)
    args.methods.extend(variants)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    target, tokenizer = load_embedded_target(device=DEVICE, dtype=DTYPE)
    draft = load_embedded_draft(target)
    drafts = {True: draft}
    for name, folder in others:
        drafts[name] = load_draft_for(target, folder)[0]
        METHODS[f"longspec_draft_{name}"] = {"assistant_model": name}
        args.methods.append(f"longspec_draft_{name}")
    bandwidth = copy_bandwidth(torch.device(DEVICE))["bytes_per_s"]
    workloads = build_workloads(tokenizer, args.lengths, args.kinds, args.prompts, seed=0)
    records, first_calls = [], []
    for length in args.lengths:
        batch = [w for w in workloads if w.length == length]
        first = torch.tensor([batch[0].input_ids], device=DEVICE)
        for method in args.methods:  # first call of each method at this shape: compile / capture / builds
            record = run(target, drafts, method, first, args.new_tokens)
            stats = record.get("stats", {})
            first_calls.append({"length": length, "method": method, "wall_s": record["wall_s"],
                                "warmup_s": stats.get("warmup_seconds"), "capture_s": stats.get("capture_seconds"),
                                "compiled": stats.get("compiled")})
            print(f"first call {length} {method}: {record['wall_s']:.2f} s", flush=True)
        for repeat in range(args.repeats):
            order = args.methods if repeat % 2 == 0 else list(reversed(args.methods))
            order = [m for m in order if repeat == 0 or m not in SLOW]
            for w in batch:
                ids = torch.tensor([w.input_ids], device=DEVICE)
                for method in order:
                    record = run(target, drafts, method, ids, args.new_tokens)
                    record.update(length=length, kind=w.kind, prompt=w.index, source=w.source, repeat=repeat)
                    records.append(record)
                    print(f"{length} {w.name} r{repeat} {method}: {record['decode_tokens_per_s']:.1f} tok/s"
                          + (f" tau {record['stats']['tau']:.2f} plain steps {record['stats']['plain_steps']}"
                             if "stats" in record else ""), flush=True)

    rows = []
    weights = weight_bytes(target)
    for length in args.lengths:
        for kind in args.kinds:
            group = [r for r in records if r["length"] == length and r["kind"] == kind]
            row = {"length": length, "kind": kind}
            for method in args.methods:
                rates = [r["decode_tokens_per_s"] for r in group if r["method"] == method]
                row[method] = {"median": statistics.median(rates), "min": min(rates), "max": max(rates), "n": len(rates)}
            by_key = {(r["prompt"], r["repeat"], r["method"]): r for r in group}
            for method in args.methods:
                base = "vanilla_static_sampled" if method in SAMPLED else "vanilla_static"
                if method == base or base not in args.methods:
                    continue
                ratios = [by_key[(p, rep, method)]["decode_tokens_per_s"] / by_key[(p, rep, base)]["decode_tokens_per_s"]
                          for (p, rep, m) in by_key if m == method and (p, rep, base) in by_key]
                row[method]["speedup_vs_static_median"] = statistics.median(ratios)
                row[method]["speedup_vs_static_range"] = [min(ratios), max(ratios)]
            taus = [r["stats"]["tau"] for r in group if r["method"] == "longspec"]
            row["tau_median"] = statistics.median(taus) if taus else None
            for method in args.methods:
                if method.startswith(VARIANTS):
                    row[method]["tau_median"] = statistics.median(r["stats"]["tau"] for r in group if r["method"] == method)
            floor_s = (weights + kv_bytes_per_token(target) * length) / bandwidth
            row["vanilla_step_bytes_floor_ms"] = 1000 * floor_s
            # divergence (bf16): LongSpec vs vanilla static, and vanilla static vs vanilla dynamic
            reps0 = {(r["prompt"], r["method"]): r["tokens"] for r in group if r["repeat"] == 0}
            prompts = sorted({r["prompt"] for r in group})
            for a, b in (("longspec", "vanilla_static"), ("longspec", "vanilla_dynamic"),
                         ("vanilla_static", "vanilla_dynamic")):
                if a in args.methods and b in args.methods:
                    diverged = [first_divergence(reps0[(p, a)], reps0[(p, b)]) for p in prompts]
                    row[f"diverged_{a}_vs_{b}"] = f"{sum(d is not None for d in diverged)}/{len(prompts)} (first at {diverged})"
            rows.append(row)

    result = {"machine": machine_info(torch.device(DEVICE), sys.argv), "copy_bandwidth_bytes_per_s": bandwidth,
              "settings": vars(args), "draft": {"source": "embedded", "weights_digest": model_weights_digest(draft)},
              "other_drafts": {name: {"source": folder, "weights_digest": model_weights_digest(drafts[name])}
                               for name, folder in others},
              "weights_bytes": weights, "rows": rows, "first_calls": first_calls,
              "runs": records}
    (out_dir / "decode_bench.json").write_text(json.dumps(result, indent=1, default=str))
    try:
        result["float32_exactness"] = float32_exactness(workloads, args)
    except Exception as error:  # noqa: BLE001 - keep the speed results whatever happens here
        result["float32_exactness"] = f"failed: {type(error).__name__}: {error}"
    print("float32 exactness:", result["float32_exactness"], flush=True)
    (out_dir / "decode_bench.json").write_text(json.dumps(result, indent=1, default=str))
    lines = [f"| length | kind | {' | '.join(args.methods)} | LongSpec / vanilla_static (median, range) | tau | vanilla step bytes floor |",
             "|---|---|" + "---|" * (len(args.methods) + 3)]
    for row in rows:
        cells = [f"{row[m]['median']:.0f} ({row[m]['min']:.0f}-{row[m]['max']:.0f})" for m in args.methods]
        ls = row.get("longspec", {})
        speed = (f"{ls['speedup_vs_static_median']:.2f}x ({ls['speedup_vs_static_range'][0]:.2f}-"
                 f"{ls['speedup_vs_static_range'][1]:.2f})") if "speedup_vs_static_median" in ls else "-"
        tau = f"{row['tau_median']:.2f}" if row["tau_median"] is not None else "-"
        lines.append(f"| {row['length']} | {row['kind']} | {' | '.join(cells)} | {speed} | {tau} | "
                     f"{row['vanilla_step_bytes_floor_ms']:.3f} ms |")
    variants = [m for m in args.methods if m.startswith(VARIANTS)]
    if variants:  # one line per tree shape or chain: speed over vanilla static and tau, beside the default's
        lines += ["", "| length | kind | tree | LongSpec / vanilla_static, sampled ones / vanilla_static_sampled (median, range) | tau |",
                  "|---|---|---|---|---|"]
        for row in rows:
            for method in ["longspec", *variants]:
                cell = row.get(method, {})
                if "speedup_vs_static_median" not in cell:
                    continue
                tau = row["tau_median"] if method == "longspec" else cell["tau_median"]
                low, high = cell["speedup_vs_static_range"]
                name = (method.removeprefix("longspec_tree_").replace("longspec_lookup", "default + lookup ")
                        .replace("longspec_draft_", "draft "))
                lines.append(f"| {row['length']} | {row['kind']} | {'default' if method == 'longspec' else name} | "
                             f"{cell['speedup_vs_static_median']:.2f}x ({low:.2f}-{high:.2f}) | {tau:.2f} |")
    table = "\n".join(lines)
    (out_dir / "decode_bench.md").write_text(table + "\n")
    print(table)
    for row in rows:
        print(row["length"], row["kind"], {k: v for k, v in row.items() if k.startswith("diverged")})
    print("first calls:", first_calls)


if __name__ == "__main__":
    main()
