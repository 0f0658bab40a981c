"""Greedy batches against vanilla, token for token: the GPU check of what tests/test_batch.py checks on the CPU.

    PYTHONPATH=src python benchmarks/batch_exactness.py --out DIR          # CUDA, float32, batch 8, 2k-8k rows
    PYTHONPATH=src python benchmarks/batch_exactness.py --out DIR --quick  # CPU smoke run, tiny sizes

One batch of eval-split prompts (code and prose) of unequal lengths, left-padded, decoded greedily
with the embedded target in float32 and its real end-of-sequence token, so rows stop at different
rounds while the batch goes on. Per form (the default: tree + the config's lookup chain; `tree`:
the tree alone), the LongSpec output of the whole batch is compared with vanilla `generate` on the
same batch through the project's `token_exact_match` metric: equal, or the first differing position
of each row. Float32, because in bf16 two correct programs may round a near-tie differently. tau
per row is reported beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from hf_longspec.bench.exactness import token_exact_match
from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.workloads import build_workloads
from hf_longspec.embedded import load_embedded_draft, load_embedded_target

FORMS = {"default": {}, "tree": {"longspec_lookup_tokens": 0}}


def compare(target, draft, ids, mask, new_tokens: int, form: str) -> dict:
    target.set_attn_implementation("sdpa")  # vanilla runs the target's own attention
    vanilla = target.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False)
    longspec = target.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False,
                               assistant_model=draft, **FORMS[form])
    width = ids.shape[1]
    match = token_exact_match().compute(predictions=longspec[:, width:].tolist(), references=vanilla[:, width:].tolist())
    rows = [{"prompt_tokens": int(mask[r].sum()), "equal": where == -1, "first_difference": None if where == -1 else where}
            for r, where in enumerate(match["first_divergence"])]
    return {"form": form, "equal_rows": sum(r["equal"] for r in rows), "rows": rows,
            "output_shapes_equal": tuple(vanilla.shape) == tuple(longspec.shape),
            "tau_per_row": draft.last_stats.tau}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true", help="CPU smoke run: 2 short rows, 8 new tokens")
    parser.add_argument("--lengths", type=int, nargs="+", default=[8000, 6000, 4096, 2048],
                        help="prompt lengths, repeated over the rows in turn")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--forms", nargs="+", choices=sorted(FORMS), default=["default", "tree"])
    args = parser.parse_args(argv)
    device = "cpu" if args.quick or not torch.cuda.is_available() else "cuda"
    lengths, batch, new_tokens = ([96, 64], 2, 8) if args.quick else (args.lengths, args.batch, args.new_tokens)
    target, tokenizer = load_embedded_target(device=device, dtype=torch.float32)
    draft = load_embedded_draft(target)
    target.generation_config.pad_token_id = tokenizer.eos_token_id
    per_length = -(-batch // len(lengths))
    pools = {n: build_workloads(tokenizer, [n], ["code", "prose"], -(-per_length // 2), seed=0) for n in lengths}
    prompts = [pools[lengths[r % len(lengths)]][r // len(lengths)].input_ids for r in range(batch)]
    padded = tokenizer.pad({"input_ids": [list(p) for p in prompts]}, padding_side="left", return_tensors="pt")
    ids, mask = padded["input_ids"].to(device), padded["attention_mask"].to(device)
    results = []
    for form in args.forms:
        result = compare(target, draft, ids, mask, new_tokens, form)
        results.append(result)
        print(json.dumps(result), flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "batch_exactness.json").write_text(json.dumps(
        {"machine": machine_info(torch.device(device), sys.argv), "dtype": "float32", "new_tokens": new_tokens,
         "results": results}, indent=1, default=str))
    lines = ["| form | rows equal to vanilla | output shapes equal | tau per row | first differences |",
             "|---|---|---|---|---|"]
    for r in results:
        differences = ", ".join(f"row {i}: {row['first_difference']}" for i, row in enumerate(r["rows"])
                                if not row["equal"]) or "-"
        lines.append(f"| {r['form']} | {r['equal_rows']} / {len(r['rows'])} | {r['output_shapes_equal']} | "
                     f"{r['tau_per_row']:.2f} | {differences} |")
    (out / "batch_exactness.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["equal_rows"] == len(r["rows"]) and r["output_shapes_equal"] for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
