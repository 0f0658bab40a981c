"""What one target forward over R new rows costs after a long cached prompt, against R = 1.

    PYTHONPATH=src python benchmarks/rows_cost.py --out $OUT/rows_cost [--context 4000] [--rows 1 2 4 8 16 32 69]

Why: a speculative round verifies R = tree nodes + 1 rows in one forward, and it pays only if that
forward costs little more than a one-row decode step. On the H200 a 135M model's step is bound by
kernel latency, so rows are nearly free; on a CPU every row is matmul arithmetic. This measures
the ratio on the machine at hand with the embedded SmolLM2 and transformers' own attention
(DynamicCache, sdpa): no LongSpec code runs, so it is the cost the model itself sets.
Best of --repeats per row count, the cache cropped back to the prompt between calls.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from transformers import DynamicCache

from hf_longspec.bench.machine import machine_info
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.embedded import load_embedded_target


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


@torch.no_grad()
def forward_seconds(target, ids, rows: int, repeats: int) -> float:
    cache = DynamicCache()
    target(ids[:, :-rows], past_key_values=cache, use_cache=True)
    prompt = cache.get_seq_length()
    best = float("inf")
    for _ in range(repeats):
        if cache.get_seq_length() > prompt:
            cache.crop(prompt - cache.get_seq_length())
        sync(ids.device)
        begin = time.perf_counter()
        target(ids[:, -rows:], past_key_values=cache, use_cache=True)
        sync(ids.device)
        best = min(best, time.perf_counter() - begin)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--context", type=int, default=4000, help="cached prompt tokens before the rows")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 69])
    parser.add_argument("--kind", default="code")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    target, tokenizer = load_embedded_target()
    target.set_attn_implementation("sdpa")
    ids = torch.tensor([long_prompt_ids(tokenizer, args.context + max(args.rows), kind=args.kind, split="eval")],
                       device=target.device)
    rows = []
    for count in args.rows:
        # every count sees the same cached prompt length: the context, then its rows
        seconds = forward_seconds(target, ids[:, :args.context + count], count, args.repeats)
        rows.append({"rows": count, "ms": seconds * 1e3})
    for row in rows:
        row["vs_one_row"] = row["ms"] / rows[0]["ms"] if args.rows[0] == 1 else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    result = {"machine": machine_info(target.device), "settings": vars(args),
              "dtype": str(target.dtype).removeprefix("torch."), "rows": rows}
    (out / "rows_cost.json").write_text(json.dumps(result, indent=2))
    print(f"| rows | ms per forward ({result['dtype']}, {args.context} cached tokens) | vs 1 row |")
    print("|---|---|---|")
    for row in rows:
        ratio = "-" if row["vs_one_row"] is None else f"{row['vs_one_row']:.2f}x"
        print(f"| {row['rows']} | {row['ms']:.1f} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
