"""The verification's prefix attention on a CPU: torch's fused flash kernel against the float32 math.

    PYTHONPATH=src python benchmarks/cpu_prefix_attention.py --out DIR [--contexts 2000 4000 8000] [--rows 1 4 21]

Why: on a CPU every tree row attends the whole cached prefix in every layer, and at 8k that arithmetic
outgrows the row's matmuls (SmolLM2: 0.55 GFLOP of attention per row against 0.27 of weights). The
varlen op (attention/prefix.py) ran the math (matmul, logsumexp, exp, matmul) off CUDA; torch's fused
CPU kernel returns the log-sum-exp the merge needs as well. Shapes are SmolLM2's (9 query heads, 3 KV
heads, head dim 64), batch 1, float32; both outputs are checked against each other before timing.
Median of --repeats calls per cell, in this process's torch threads.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from hf_longspec.attention.math_attention import grouped_attention_math
from hf_longspec.attention.prefix import grouped_prefix_attention_varlen
from hf_longspec.bench.machine import machine_info

QUERY_HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64


def median_ms(fn, repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def cell(context: int, rows: int, repeats: int) -> dict:
    generator = torch.Generator().manual_seed(context + rows)
    q = torch.randn(1, QUERY_HEADS, rows, HEAD_DIM, generator=generator)
    keys, values = (torch.randn(1, KV_HEADS, context + 64, HEAD_DIM, generator=generator) for _ in range(2))
    lengths, scale = torch.tensor([context]), HEAD_DIM ** -0.5
    fused = grouped_prefix_attention_varlen(q, keys, values, lengths, scale)
    math = grouped_attention_math(q, keys[:, :, :context], values[:, :, :context], scale)
    error = max((a - b).abs().max().item() for a, b in zip(fused, math))
    if error > 1e-4:
        raise SystemExit(f"{context} keys, {rows} rows: the fused kernel and the math differ by {error:.2e}")
    fused_ms = median_ms(lambda: grouped_prefix_attention_varlen(q, keys, values, lengths, scale), repeats)
    math_ms = median_ms(lambda: grouped_attention_math(q, keys[:, :, :context], values[:, :, :context], scale), repeats)
    return {"context": context, "rows": rows, "math_ms": math_ms, "fused_ms": fused_ms,
            "speedup": math_ms / fused_ms, "max_abs_difference": error}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--contexts", type=int, nargs="+", default=[2000, 4000, 8000])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 21])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    cells = [cell(context, rows, args.repeats) for context in args.contexts for rows in args.rows]
    result = {"machine": machine_info(torch.device("cpu"), ["benchmarks/cpu_prefix_attention.py", *(sys.argv[1:] if argv is None else argv)]),
              "threads": torch.get_num_threads(), "cells": cells}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cpu_prefix_attention.json").write_text(json.dumps(result, indent=1))
    lines = ["| keys | rows | math (ms) | fused (ms) | fused speedup |", "|---|---|---|---|---|"]
    lines += [f"| {c['context']} | {c['rows']} | {c['math_ms']:.2f} | {c['fused_ms']:.2f} | {c['speedup']:.2f}x |"
              for c in cells]
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    main()
