"""Batched decoding: LongSpec against batched vanilla static, per batch size (for the batch issue).

    PYTHONPATH=src python benchmarks/batch_bench.py --out DIR [--batch-sizes 1 4 8 16] [--lengths 4096 8000]
    PYTHONPATH=src python benchmarks/batch_bench.py --quick --out DIR      # CPU smoke run, tiny sizes
    ... --max-nodes 0 32 16     # also LongSpec with the tree cut to 32 and 16 drafted nodes (0: default tree)

Per (length, batch size B): B eval-split prompts of exactly `length` tokens (code and prose
alternating, so no padding is needed), greedy, the shipped draft. Methods, interleaved, each timed
after a first (compile / capture) call of the same shape:
- vanilla_static: `generate(ids, cache_implementation="static")` on the (B, length) batch;
- longspec: `generate(ids, assistant_model=draft)` on the same batch (with `--max-nodes N`, also
  `longspec_nN`: the same with `longspec_max_nodes=N`, a smaller tree per row: the verification
  forward grows with batch x nodes, so a large batch may prefer a smaller tree).
Decode tokens/s = B x (new tokens - 1) / (call time - time of a 1-token call): the whole batch's
throughput after the prefill. Batch 1 runs each prompt of the largest batch alone (its tokens/s over
all of them), and every larger batch also reports batch 1's speedup on its own prompts. Also reported: tau per row and peak CUDA memory above the model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.workloads import build_workloads
from hf_longspec.embedded import load_embedded_draft, load_embedded_target


def timed_call(target, ids, new_tokens, **kwargs) -> float:
    if ids.device.type == "cuda":
        torch.cuda.synchronize()
    begin = time.perf_counter()
    target.generate(ids, max_new_tokens=new_tokens, do_sample=False, **kwargs)
    if ids.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - begin


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=None)
    parser.add_argument("--lengths", type=int, nargs="+", default=None)
    parser.add_argument("--new-tokens", type=int, default=None)
    parser.add_argument("--max-nodes", type=int, nargs="+", default=[0],
                        help="LongSpec node caps to compare; 0 is the draft's default tree")
    args = parser.parse_args(argv)
    args.max_nodes = [0] + [cap for cap in args.max_nodes if cap != 0]  # the default tree is always the reference
    device = "cpu" if args.quick or not torch.cuda.is_available() else "cuda"
    batch_sizes = args.batch_sizes or ([1, 2] if args.quick else [1, 4, 8, 16])
    lengths = args.lengths or ([256] if args.quick else [4096, 8000])
    new_tokens = args.new_tokens or (8 if args.quick else 128)
    target, tokenizer = load_embedded_target(device=device)
    draft = load_embedded_draft(target)
    # every row generates exactly new_tokens (no eos), so both methods do the same work
    target.generation_config.pad_token_id = target.generation_config.eos_token_id
    target.generation_config.eos_token_id = None
    rows = []
    batch_sizes = sorted(batch_sizes)  # batch 1 first: the later rows compare with its prompts
    for length in lengths:
        alone = None
        per_kind = -(-max(batch_sizes) // 2)
        prompts = build_workloads(tokenizer, [length], ["code", "prose"], per_kind, seed=0)
        for batch in batch_sizes:
            # compile afresh for every batch shape, as a user serving one batch size gets it: without this,
            # dynamo turns the batch dimension dynamic after the second shape and later sizes reuse that code
            torch._dynamo.reset()
            ids = torch.tensor([w.input_ids for w in prompts[:batch]], device=device)
            row = {"length": length, "batch": batch}
            methods = [("vanilla_static", {"cache_implementation": "static"})]
            for cap in args.max_nodes:
                methods.append(("longspec" if cap == 0 else f"longspec_n{cap}",
                                {"assistant_model": draft, **({"longspec_max_nodes": cap} if cap else {})}))
            # batch 1 runs every prompt of the largest batch alone, so that each batch size's speedup can be
            # set against batch 1's on the same prompts (tau differs more between prompts than between batches)
            batches = [ids]
            if batch == 1:
                batches = [torch.tensor([w.input_ids], device=device) for w in prompts[:max(batch_sizes)]]
            for method, kwargs in methods:
                if "assistant_model" not in kwargs:
                    target.set_attn_implementation("sdpa")  # vanilla runs the target's own attention
                if device == "cuda":
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                row[f"{method}_first_call_s"] = timed_call(target, batches[0], new_tokens, **kwargs)
                if device == "cuda":
                    row[f"{method}_peak_memory_above_model_bytes"] = torch.cuda.max_memory_allocated() - base
                seconds, taus = [], []
                for rows_ids in batches:
                    prefill = min(timed_call(target, rows_ids, 1, **kwargs) for _ in range(2))
                    whole = min(timed_call(target, rows_ids, new_tokens, **kwargs) for _ in range(2))
                    seconds.append(whole - prefill)
                    if "assistant_model" in kwargs:
                        taus.append(draft.last_stats.tau)
                row[f"{method}_decode_s_per_call"] = seconds
                row[f"{method}_decode_tokens_per_s"] = batch * (new_tokens - 1) * len(seconds) / sum(seconds)
                if "assistant_model" in kwargs:
                    suffix = method[len("longspec"):]
                    row["tau_per_row" + suffix] = sum(taus) / len(taus)
                    row["speedup" + suffix] = (row[f"{method}_decode_tokens_per_s"]
                                               / row["vanilla_static_decode_tokens_per_s"])
            if batch == 1:
                alone = row
            elif alone is not None:  # batch 1's speedup on this batch's prompts, each run alone
                row["batch1_speedup_same_prompts"] = (sum(alone["vanilla_static_decode_s_per_call"][:batch])
                                                      / sum(alone["longspec_decode_s_per_call"][:batch]))
            rows.append(row)
            print(json.dumps(row), flush=True)
            write_results(Path(args.out), device, new_tokens, rows)  # after every row: a cut-off run keeps its rows
    print((Path(args.out) / "batch_bench.md").read_text())


def write_results(out: Path, device: str, new_tokens: int, rows: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "batch_bench.json").write_text(json.dumps({"machine": machine_info(torch.device(device), sys.argv),
                                                      "new_tokens": new_tokens, "rows": rows}, indent=1, default=str))
    lines = ["| length | batch | vanilla static tok/s | LongSpec tok/s | speedup | batch 1 on the same prompts | "
             "tau per row | peak memory above model (vanilla / LongSpec) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        variants = "".join(f", n{key[len('speedup_n'):]}: {r[key]:.2f}x (tau {r['tau_per_row_n' + key[len('speedup_n'):]]:.2f})"
                           for key in r if key.startswith("speedup_n"))
        memory = "-"
        if "longspec_peak_memory_above_model_bytes" in r:
            memory = (f"{r['vanilla_static_peak_memory_above_model_bytes'] / 2**20:.0f} / "
                      f"{r['longspec_peak_memory_above_model_bytes'] / 2**20:.0f} MiB")
        alone = f"{r['batch1_speedup_same_prompts']:.2f}x" if "batch1_speedup_same_prompts" in r else "-"
        lines.append(f"| {r['length']} | {r['batch']} | {r['vanilla_static_decode_tokens_per_s']:.0f} | "
                     f"{r['longspec_decode_tokens_per_s']:.0f} | {r['speedup']:.2f}x{variants} | {alone} | "
                     f"{r['tau_per_row']:.2f} | {memory} |")
    (out / "batch_bench.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
