"""What a captured sampled round costs beside a greedy one, per form of the tree walk, in one run: each
decoder's round captured as one CUDA graph and replayed at a fixed context, as generate() replays it.

    PYTHONPATH=src python benchmarks/sampled_round_cost.py --out DIR [--length 8000] [--repeats 50]
    PYTHONPATH=src python benchmarks/sampled_round_cost.py --out DIR --device cpu --length 600 --repeats 2  # smoke

SmolLM2-135M's shape with random bf16 weights (a round's cost does not depend on its weights: every
shape is static) and the shipped draft (its config: re-ranked leaves, the cross-attention window),
compiled as generate() compiles on CUDA. Rounds:
- greedy: the default tree and its 32-token lookup chain (a greedy call's round);
- sampled (temperature 0.8) with the same chain (a sampled call's round since the forty-eighth session), its walk
  compiled whole as the round compiles it, and eager;
- sampled without the chain (``longspec_lookup_tokens=0``; a sampled call's round until then);
- greedy uncompiled (``longspec_compile=False``: captured, not compiled), and with its drafting compiled alone
  (the decoder's ``compile_verify=False``): what a first call saves against what each round then costs.
The forty-seventh session's variants (each depth's tries compiled; the walk and the commit compiled as well) ran
once on an H100 (docs/results/session48_2026-12-06/) and went with the code they timed.
Each also has its drafting and its verification forward captured alone, so the walk's share is
(round - draft - verify); the walk is also timed alone on the round's own logits. Before the warm-up, each part's
first call is timed alone (drafting, verification, walk, commit: where a first call's compile time goes).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers.generation.logits_process import TemperatureLogitsWarper

from hf_longspec import LongSpecDraftModel
from hf_longspec.bench.machine import machine_info
from hf_longspec.demo import timed
from hf_longspec.generation import TreeLayout
from hf_longspec.generation.acceptance import greedy_accept
from hf_longspec.generation.sampled_accept import DeviceWarpers, sampled_walk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_study import capture, cuda_time, filled_decoder, random_target  # noqa: E402

SMOLLM2 = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
               num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
               rope_theta=100000.0, rms_norm_eps=9.999999747378752e-06, tie_word_embeddings=True)
DRAFT = Path(__file__).resolve().parents[1] / "model_cards" / "longspec-smollm2-135m-instruct"
TEMPERATURE = 0.8


def median_ms(fn, repeats: int, device) -> float:
    return 1000 * statistics.median(cuda_time(capture(torch.no_grad()(fn), device), repeats, device))


@torch.no_grad()
def first_call_parts(decoder, draft, device, sampled: bool) -> dict:
    """Seconds of each part's first call (its compile, where the round compiles: a first call's cost), in round
    order. In one process a later variant finds what an earlier one compiled (dynamo's and inductor's caches)."""
    parts = {}
    _, parts["draft"] = timed(draft, device)
    logits, parts["verify"] = timed(decoder._verify, device)
    if sampled:
        walk = lambda: decoder._sample_accept(decoder.layout, decoder.tree, logits, decoder.warpers)  # noqa: E731
    else:
        walk = lambda: greedy_accept(decoder.layout, decoder.tree, logits)  # noqa: E731
    paths, parts["walk"] = timed(walk, device)
    _, parts["commit"] = timed(lambda: decoder._keep_paths(paths), device)
    return parts


def round_costs(decoder, length: int, repeats: int, device, sampled: bool) -> dict:
    """The round, its drafting and its verification forward, each captured alone, every replay at ``length``;
    for a sampled round also its walk alone on the round's logits."""
    def whole_round():
        decoder.cache.lengths.fill_(length)
        decoder.round()

    draft = decoder._draft_sampled if sampled else decoder._draft_greedy
    decoder.cache.lengths.fill_(length)
    result = {"first_call_s": first_call_parts(decoder, draft, device, sampled)}
    begin = time.perf_counter()
    with torch.no_grad():
        decoder.cache.lengths.fill_(length)
        decoder._warm_up()  # compiles what is left, as generate's first round does
    result["warmup_s"] = time.perf_counter() - begin + sum(result["first_call_s"].values())
    for name, fn in (("draft", draft), ("verify", decoder._verify), ("round", whole_round)):
        decoder.cache.lengths.fill_(length)
        result[f"{name}_ms"] = median_ms(fn, repeats, device)
    if sampled:
        decoder.cache.lengths.fill_(length)
        with torch.no_grad():
            logits = decoder._verify().clone()
        result["walk_alone_ms"] = median_ms(
            lambda: decoder._sample_accept(decoder.layout, decoder.tree, logits, decoder.warpers), repeats, device)
    result["rest_ms"] = result["round_ms"] - result["draft_ms"] - result["verify_ms"]
    decoder.cache.lengths.fill_(length)
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--length", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run, eager and float32 (nothing compiles)")
    parser.add_argument("--variants", nargs="*", help="the rounds to time, by name (default: all)")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    target = random_target(SMOLLM2, device, dtype)
    draft = LongSpecDraftModel.from_pretrained(str(DRAFT), dtype=dtype).to(device).eval().bind(target)
    tree = TreeLayout(tuple(draft.config.tree_widths), rerank_leaves=draft.config.tree_rerank_leaves)
    warpers = DeviceWarpers((TemperatureLogitsWarper(TEMPERATURE),))
    chained = tree.with_lookup(draft.config.lookup_tokens)
    variants = {  # name: (layout, sampled, the walk a sampled decoder runs, what compiles: drafting, verification)
        "greedy (tree + 32-token chain)": (chained, False, None, (cuda, cuda)),
        "sampled (tree + 32-token chain), walk compiled whole": (chained, True, sampled_walk(cuda), (cuda, cuda)),
        "sampled (tree + 32-token chain), walk eager": (chained, True, sampled_walk(False), (cuda, cuda)),
        "sampled, tree alone": (tree, True, sampled_walk(cuda), (cuda, cuda)),
        # longspec_compile=False: the round captured uncompiled (what a first call saves, what a round then costs)
        "greedy (tree + 32-token chain), uncompiled": (chained, False, None, (False, False)),
        "greedy (tree + 32-token chain), drafting compiled, verification eager": (chained, False, None, (cuda, False)),
    }
    unknown = set(args.variants or ()) - set(variants)
    if unknown:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {list(variants)}")
    rows, result = [], {}
    for name, (layout, sampled, walk, (compile_draft, compile_verify)) in variants.items():
        if args.variants and name not in args.variants:
            continue
        options = {"sampling": True, "warpers": warpers} if sampled else {}
        decoder = filled_decoder(target, draft, layout, args.length, device, compile=compile_draft,
                                 compile_verify=compile_verify, **options)
        if walk is not None:
            decoder._sample_accept = walk
        try:
            row = {"variant": name, "nodes": layout.num_nodes,
                   **round_costs(decoder, args.length, args.repeats, device, sampled)}
            row["compiled"] = decoder.compiled  # False if compiling failed and the decoder fell back to eager
        except Exception as error:  # noqa: BLE001 - a variant that cannot run is a finding; the others still run
            row = {"variant": name, "nodes": layout.num_nodes, "error": f"{type(error).__name__}: {error}"[:2000]}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del decoder
        torch.cuda.empty_cache()
        result = write_results(args, device, dtype, tree, rows)  # after each variant: a cut run keeps what it timed
    print((Path(args.out) / "sampled_round_cost.md").read_text())
    return result


def write_results(args, device, dtype, tree, rows) -> dict:
    lines = [f"context {args.length}, SmolLM2 shape (random {dtype} weights), shipped draft config, median of "
             f"{args.repeats} replays each", "",
             "| round | nodes | round ms | draft ms | verify ms | rest (walk, commit) ms | walk alone ms | warm-up s "
             "| first call s: draft / verify / walk / commit |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['variant']} | {r['nodes']} | failed: {r['error'][:200]} | | | | | | |")
            continue
        walk_alone = f"{r['walk_alone_ms']:.3f}" if "walk_alone_ms" in r else "-"
        first = " / ".join(f"{seconds:.1f}" for seconds in r["first_call_s"].values())
        lines.append(f"| {r['variant']} | {r['nodes']} | {r['round_ms']:.3f} | {r['draft_ms']:.3f} | "
                     f"{r['verify_ms']:.3f} | {r['rest_ms']:.3f} | {walk_alone} | {r['warmup_s']:.1f} | {first} |")
    result = {"machine": machine_info(device), "length": args.length, "repeats": args.repeats, "rows": rows,
              "temperature": TEMPERATURE, "tree_widths": list(tree.widths)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sampled_round_cost.json").write_text(json.dumps(result, indent=1))
    (out / "sampled_round_cost.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
