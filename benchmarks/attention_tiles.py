"""Which tiling of the hybrid tree attention kernel is fastest, per verification shape (GPU only).

    PYTHONPATH=src python benchmarks/attention_tiles.py --out DIR [--rep-ms 25] [--passes 3]
    PYTHONPATH=src python benchmarks/attention_tiles.py --out DIR --quick     # CPU smoke run (Triton interpreter)

Why: the verification's attention at the Llama-3.1-8B shape is a few hundred packed query rows (GQA
group x tree rows) against 32k-128k cached keys; its time depends on the row tile (how often each KV
head is re-read, how much of a tile is padding), the key tile, warps and pipeline stages, and the
number of key splits (how well the SMs are filled). This sweeps them for the shapes the node budget
produces and times ``cached_tree_attn`` (split kernel + combine, one layer) with
``triton.testing.do_bench`` (median, L2 flushed). Every config's output is compared with the default
config's before it counts. Prints a table: default against best per shape, and writes JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
from pathlib import Path

import torch

# (batch, cached tokens, tree rows = drafted nodes + root), at the 8B shape: 32 query heads, 8 KV heads, D 128
SHAPES = [(1, 32768, 16), (1, 32768, 32), (1, 32768, 33), (1, 32768, 69),
          (1, 130560, 9), (1, 130560, 16), (1, 130560, 17), (1, 130560, 33),
          (4, 32768, 9), (4, 32768, 16), (1, 8192, 69)]
HEADS_8B = (32, 8, 128)
QUICK_SHAPES, HEADS_QUICK = [(1, 200, 9), (2, 150, 5)], (4, 1, 16)  # CPU smoke run


def inputs(batch, context, rows, heads, device, dtype):
    query_heads, kv_heads, head_dim = heads
    generator = torch.Generator(device=device).manual_seed(0)
    capacity = context + rows
    k = torch.randn(batch, kv_heads, capacity, head_dim, device=device, generator=generator).to(dtype)
    v = torch.randn(batch, kv_heads, capacity, head_dim, device=device, generator=generator).to(dtype)
    q = torch.randn(batch, query_heads, rows, head_dim, device=device, generator=generator).to(dtype)
    mask = torch.tril(torch.ones(rows, rows, dtype=torch.bool, device=device))
    seqlens = torch.full((batch,), context, dtype=torch.int32, device=device)
    return q, k, v, mask, seqlens


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--rep-ms", type=int, default=25)
    parser.add_argument("--passes", type=int, default=1, help="time every tiling this many times; medians")
    parser.add_argument("--quick", action="store_true", help="tiny shapes and two tilings, on the CPU interpreter")
    args = parser.parse_args(argv)
    if args.quick or not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")  # before the kernels import triton
    from hf_longspec.bench.kernel_timing import median_time_us
    from hf_longspec.bench.machine import machine_info
    from hf_longspec.kernels import Tiles, cached_tree_attn, plan_splits

    device = torch.device("cpu" if args.quick else "cuda")
    dtype = torch.float32 if args.quick else torch.bfloat16
    shapes, heads = (QUICK_SHAPES, HEADS_QUICK) if args.quick else (SHAPES, HEADS_8B)
    configs = ([Tiles(16, 16, 4, 2), Tiles(32, 32, 4, 2)] if args.quick else
               [Tiles(m, n, w, s) for m, n, w, s in itertools.product((32, 64, 128), (32, 64, 128), (4, 8), (2, 3, 4))])
    time_us = lambda call: median_time_us(call, device, warmup=5, rep_ms=args.rep_ms, cpu_repeats=1)  # noqa: E731
    rows_out = []
    for batch, context, rows in shapes:
        q, k, v, mask, seqlens = inputs(batch, context, rows, heads, device, dtype)
        default_plan = plan_splits(batch, heads[0], heads[1], rows, context, heads[2], q.dtype, device)
        reference, _ = cached_tree_attn(q, k, v, mask, seqlens)

        def timed(tiles=None, splits=None):
            call = lambda: cached_tree_attn(q, k, v, mask, seqlens, tiles=tiles, num_splits=splits)  # noqa: E731
            try:
                out, _ = call()
            except Exception as error:  # noqa: BLE001 (too much shared memory, or a tile triton refuses)
                return None, type(error).__name__
            error = (out.float() - reference.float()).abs().max().item()
            if not error < 2e-2:
                return None, f"wrong output (max error {error:.3g})"
            return time_us(call), None

        timed()  # untimed: the first timing of a shape read up to 55% high on the H200 (2026-12-01)
        # passes sweep all tilings in turn, so a slow spell of the GPU spreads over all, not one
        passes = [[timed(tiles) for tiles in configs] + [timed()] for _ in range(args.passes)]
        results = []
        for index, tiles in enumerate(configs):
            kept = [run[index][0] for run in passes if run[index][0] is not None]
            results.append({"tiles": tiles._asdict(), "us": statistics.median(kept) if kept else None,
                            "us_per_pass": kept, "skipped": passes[0][index][1] if not kept else None})
        default_us = statistics.median(run[-1][0] for run in passes)
        ranked = sorted((r for r in results if r["us"] is not None), key=lambda r: r["us"])
        best = ranked[0]
        best_tiles = Tiles(**best["tiles"])
        best_plan = plan_splits(batch, heads[0], heads[1], rows, context, heads[2], q.dtype, device, tiles=best_tiles)
        splits = {}
        for factor in (0.5, 2, 4):  # the key splits around the policy's choice, with the best tiles
            n = max(1, int(best_plan.num_splits * factor))
            splits[n] = timed(best_tiles, n)[0]
        row = {"batch": batch, "context": context, "tree_rows": rows, "packed_rows": rows * heads[0] // heads[1],
               "default_plan": default_plan._asdict(), "default_us": default_us, "best": best,
               "best_plan": best_plan._asdict(), "top5": ranked[:5], "best_tiles_by_splits_us": splits,
               "all": results}
        rows_out.append(row)
        print(json.dumps({key: row[key] for key in ("batch", "context", "tree_rows", "default_us", "best",
                                                     "best_tiles_by_splits_us")}), flush=True)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "attention_tiles.json").write_text(json.dumps({"machine": machine_info(device, sys.argv),
                                                              "rows": rows_out}, indent=1, default=str))
    lines = ["| batch | context | tree rows | packed rows | default (m, n, warps, stages / splits) | default us | "
             "best | best us | best / default |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows_out:
        d, b = r["default_plan"], r["best"]["tiles"]
        lines.append(f"| {r['batch']} | {r['context']} | {r['tree_rows']} | {r['packed_rows']} | {d['block_m']}, "
                     f"{d['block_n']} / {d['num_splits']} | {r['default_us']:.1f} | {b['block_m']}, {b['block_n']}, "
                     f"{b['num_warps']}, {b['num_stages']} / {r['best_plan']['num_splits']} | {r['best']['us']:.1f} | "
                     f"{r['best']['us'] / r['default_us']:.2f} |")
    (Path(args.out) / "attention_tiles.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
