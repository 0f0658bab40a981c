"""What a wider draft MLP costs per decoding round (issue 12, seventeenth session).

Trained from the start, a draft whose MLP is 3x wider agrees with the target more often
(docs/training.md, "Width from the start"). This measures its price at decoding, side by side in one
process: the embedded SmolLM2 target (bf16 on CUDA) with the shipped draft, and with the same draft
grown to each `--widths` (training/widen.py: the same function, only the shapes differ, which is all a
round's time depends on). Per context: the decoder generate() would build (`scale_study.filled_decoder`:
its cache filled with random K/V up to the context, so no prefill is needed), the tree generate()
drafts there (the node budget of generation/tree_budget.py; the prompt-lookup chain left out, as it
costs every width the same), the draft phase, the verification forward and a whole round each captured
as a CUDA graph and replayed (`scale_study.round_costs`), optionally compiled as generate() compiles
them (`--compile-contexts`). Prints a table; writes draft_width_cost.json.

    PYTHONPATH=src python benchmarks/draft_width_cost.py --out DIR [--contexts 2048 8000] [--compile-contexts 8000]
    PYTHONPATH=src python benchmarks/draft_width_cost.py --out DIR --contexts 256 --repeats 2   # CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.probes import copy_bandwidth
from hf_longspec.embedded import load_embedded_draft, load_embedded_target
from hf_longspec.generation.tree_budget import node_budget, tree_within
from hf_longspec.training.widen import widen_mlp

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_study import round_costs  # noqa: E402  (sibling script)


def mlp_bytes(draft) -> int:
    return sum(p.numel() * p.element_size() for p in draft.mlp.parameters())


def drafts_by_width(target, widths: list[int]) -> dict:
    """The shipped draft and, per wider width, a copy grown to it, all in the target's dtype and device."""
    shipped = load_embedded_draft(target)
    drafts = {shipped.config.intermediate_size: shipped}
    for width in widths:
        if width not in drafts:
            reference = load_embedded_draft(target).float()
            drafts[width] = widen_mlp(reference, width).to(device=target.device, dtype=target.dtype).eval().bind(target)
    return drafts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--widths", type=int, nargs="+", default=[4608])
    parser.add_argument("--contexts", type=int, nargs="+", default=[2048, 8000])
    parser.add_argument("--compile-contexts", type=int, nargs="*", default=[],
                        help="also time the round compiled, as generate() runs it (69 s of compile for the first width on the H200, 19 s for the next)")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    target, _ = load_embedded_target(device=str(device))
    drafts = drafts_by_width(target, args.widths)
    command = sys.argv if argv is None else ["draft_width_cost.py", *argv]
    report = {"machine": machine_info(device, command), "settings": vars(args),
              "copy_bandwidth_bytes_per_s": copy_bandwidth(device)["bytes_per_s"], "rows": []}
    for length in args.contexts:
        for width, draft in drafts.items():
            layout = tree_within(draft.config, node_budget(draft.config, target, 1, length), target.config.vocab_size)
            row = {"context": length, "intermediate_size": width, "mlp_bytes": mlp_bytes(draft),
                   "tree_widths": list(layout.widths), **round_costs(target, draft, layout, length, args.repeats, device)}
            if length in args.compile_contexts:
                begin = time.perf_counter()
                compiled = round_costs(target, draft, layout, length, args.repeats, device, compile=True)
                row["compiled"] = {**compiled, "setup_and_compile_s": time.perf_counter() - begin}
            report["rows"].append(row)
            print(json.dumps(row), flush=True)
            (out / "draft_width_cost.json").write_text(json.dumps(report, indent=1))  # a cut-off run keeps its rows
    print(table(report))
    return 0


def table(report: dict) -> str:
    """Per context and width: the phases' replay times, and the round against the shipped width's."""
    lines = ["| context | MLP units | MLP MiB | draft ms | verify ms | round ms | round / shipped width's | compiled round ms |",
             "|---|---|---|---|---|---|---|---|"]
    base = {row["context"]: row for row in report["rows"] if row["intermediate_size"] == min(
        r["intermediate_size"] for r in report["rows"])}
    for row in report["rows"]:
        compiled = row.get("compiled", {}).get("round_ms")
        lines.append(f"| {row['context']} | {row['intermediate_size']} | {row['mlp_bytes'] / 2**20:.1f} | "
                     f"{row['draft_ms']:.3f} | {row['verify_forward_ms']:.3f} | {row['round_ms']:.3f} | "
                     f"{row['round_ms'] / base[row['context']]['round_ms']:.3f} | "
                     f"{'-' if compiled is None else f'{compiled:.3f}'} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
