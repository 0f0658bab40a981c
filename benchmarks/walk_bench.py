"""What the sampled round's tree walk costs on the device, alone: ``sample_accept`` captured as a CUDA
graph and replayed, eager and as a compiled round runs it (``sampled_walk(True)``: compiled whole, beside a
lookup chain or not), next to ``greedy_accept`` (no model: random trees and scores of SmolLM2's vocabulary).
Each depth's tries compiled alone, the code until the forty-sixth session (beside a chain until the
forty-eighth), went with that code; its times are in docs/benchmarks.md.

    PYTHONPATH=src python benchmarks/walk_bench.py --out DIR [--replays 200] [--rerank-leaves]

Why: a sampled SmolLM2 round took 6.0-6.3 ms on the H200 (eighth session), a greedy one 3.3-3.7 ms,
and the difference is the walk: each depth tries a node's children, each try a few vocabulary-wide
ops, and the rest of the walk is a few hundred small ops. This times exactly that part, per variant,
so the cheaper one can be chosen by measurement.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.generation.acceptance import greedy_accept
from hf_longspec.generation.draft_tree import TreeBuffers, TreeLayout
from hf_longspec.generation.sampled_accept import sample_accept, sampled_walk

VOCAB = 49152  # SmolLM2


def random_tree(layout: TreeLayout, batch: int, device) -> tuple[TreeBuffers, torch.Tensor]:
    """A tree of the layout's shape (each depth's nodes under the previous depth's first node) and
    target scores; the walk's cost does not depend on what it accepts (its shapes are static)."""
    tree = TreeBuffers.allocate(layout, batch, device, VOCAB, keep_probs=True)
    tree.tokens.random_(0, VOCAB)
    tree.valid.fill_(True)
    for depth in range(1, layout.depth + 1):
        start = layout.offsets[depth]
        tree.parents[:, start : start + layout.widths[depth - 1]] = layout.offsets[depth - 1]
    if layout.lookup:
        chain = torch.arange(layout.lookup_offset, layout.num_nodes, device=device)
        tree.parents[:, chain] = torch.cat([chain.new_zeros(1), chain[:-1]])
    tree.draft_probs.copy_(torch.softmax(torch.randn_like(tree.draft_probs), dim=-1))
    return tree, torch.randn(batch, layout.num_nodes, VOCAB, device=device)


def time_graph(fn, replays: int) -> float:
    """Milliseconds per replay of ``fn`` captured as one CUDA graph."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()  # warm-up (and compile), as capture wants
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    begin = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    return 1000 * (time.perf_counter() - begin) / replays


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--widths", type=int, nargs="+", default=[4, 16, 16, 16, 16])
    parser.add_argument("--lookups", type=int, nargs="+", default=[0, 32])
    parser.add_argument("--rerank-leaves", action="store_true", help="the shipped tree's re-ranked leaves")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("walk_bench times CUDA graphs: it needs a GPU")
    device = torch.device("cuda")
    rows = []
    for lookup in args.lookups:
        layout = TreeLayout(tuple(args.widths), lookup, rerank_leaves=args.rerank_leaves)
        tree, scores = random_tree(layout, 1, device)
        variants = {
            "greedy_accept": lambda: greedy_accept(layout, tree, scores),
            "sample_accept eager": lambda: sample_accept(layout, tree, scores),
            "sample_accept as the round compiles it": lambda: sampled_walk(True)(layout, tree, scores),
        }
        for name, fn in variants.items():
            begin = time.perf_counter()
            ms = time_graph(fn, args.replays)
            rows.append({"nodes": layout.num_nodes, "lookup": lookup, "variant": name, "ms_per_replay": ms,
                         "setup_s": time.perf_counter() - begin})
            print(f"{layout.num_nodes} nodes (chain {lookup}) {name}: {ms:.3f} ms", flush=True)
    lines = ["| nodes (chain) | variant | ms per replay |", "|---|---|---|"]
    lines += [f"| {r['nodes']} ({r['lookup']}) | {r['variant']} | {r['ms_per_replay']:.3f} |" for r in rows]
    print("\n".join(lines))
    result = {"machine": machine_info(device), "rows": rows, "widths": args.widths, "vocab": VOCAB,
              "rerank_leaves": args.rerank_leaves}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "walk_bench.json").write_text(json.dumps(result, indent=1))
    (out / "walk_bench.md").write_text("\n".join(lines) + "\n")
    return result


if __name__ == "__main__":
    main()
