"""`hf-longspec bench`: LongSpec against its peers on long real prompts, in one process and run.

    hf-longspec bench --output bench-results               # GPU: 1k..8k prompts, all methods
    hf-longspec bench --quick --output /tmp/bq             # CPU smoke run: one 256-token prompt

Writes DIR/bench.json (every run, the per-length rows, machine info, command line),
DIR/bench.md (the table) and DIR/speedup.png, and prints the table last.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import torch

from .exactness import token_exact_match
from .machine import machine_info
from .methods import METHOD_NAMES, build_methods
from .probes import copy_bandwidth
from .runner import BenchSettings, run_methods
from .summary import markdown_table, summarize
from .traffic import kv_bytes_per_token, weight_bytes
from ..corpus import KINDS
from ..errors import CommandLineError
from ..publishing.weights_digest import model_weights_digest
from .workloads import WORKLOAD_KINDS, build_workloads

SCHEMA = "hf-longspec-bench/1"
DEFAULT_LENGTHS = (1024, 2048, 4096, 8000)
QUICK = {"lengths": [256], "kinds": ["code"], "prompts_per_length": 1, "max_new_tokens": 8, "warmup_new_tokens": 2}
FULL = {"lengths": list(DEFAULT_LENGTHS), "kinds": list(WORKLOAD_KINDS), "prompts_per_length": 1,
        "max_new_tokens": 128, "warmup_new_tokens": 8}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output", "--out", dest="output", default="bench-results",
                        help="output folder for bench.json, bench.md, speedup.png (--out: older spelling)")
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny CPU smoke run; defaults become {QUICK}")
    parser.add_argument("--lengths", type=int, nargs="+", default=None,
                        help=f"prompt lengths in tokens (default {list(DEFAULT_LENGTHS)}; "
                             "cut to the target's max positions minus --max-new-tokens)")
    parser.add_argument("--kinds", nargs="+", choices=KINDS, default=None,
                        help="code = repository-level completion, prose = long-document continuation (default both); "
                             "docs, man, changelog, multilingual, licenses, pylib: continuation per corpus source")
    parser.add_argument("--prompts-per-length", type=int, default=None, help="prompts per length and kind (default 1)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="new tokens per generate call (default 128)")
    parser.add_argument("--warmup-new-tokens", type=int, default=None, help="new tokens of each warm-up call")
    parser.add_argument("--methods", nargs="+", choices=METHOD_NAMES, default=list(METHOD_NAMES),
                        help="methods to run (both vanilla references always run)")
    parser.add_argument("--pld-tokens", type=int, default=10, help="prompt_lookup_num_tokens for prompt lookup")
    parser.add_argument("--draft", default="embedded",
                        help="'embedded' (shipped trained draft; untrained if none ships), 'untrained', or a folder")
    parser.add_argument("--target", default="embedded", help="'embedded' (SmolLM2-135M-Instruct) or a local model folder")
    parser.add_argument("--gguf-file", default=None, help="GGUF file inside --target")
    parser.add_argument("--device", default=None, help="cuda / cpu (default: cuda when available)")
    parser.add_argument("--seed", type=int, default=0, help="prompt selection and untrained-draft init")
    parser.add_argument("--no-plot", action="store_true", help="skip speedup.png")
    parser.add_argument("--no-progress", action="store_true", help="no tqdm progress bars")


def resolve_settings(args) -> dict:
    """Explicit options win; the rest come from the quick or full defaults."""
    defaults = QUICK if args.quick else FULL
    return {key: getattr(args, key) if getattr(args, key, None) is not None else value
            for key, value in defaults.items()}


def load_target(args):
    """(model, tokenizer) for --target; tests replace this to reuse an already loaded model."""
    from ..embedded import load_target as load_target_spec

    return load_target_spec(args.target, args.gguf_file, args.device)


def _fit_lengths(lengths, max_new_tokens: int, max_positions: int, notes: list[str]) -> list[int]:
    """Prompt lengths cut to what leaves room for the new tokens; refuses new tokens that leave none."""
    limit = max_positions - max_new_tokens
    if limit < 1:
        raise CommandLineError(f"--max-new-tokens {max_new_tokens} leaves no room for a prompt within the target's "
                               f"max_position_embeddings ({max_positions}); allowed: at most {max_positions - 1}.")
    fitted = sorted({min(length, limit) for length in lengths})
    if any(length > limit for length in lengths):
        notes.append(f"prompt lengths above {limit} (max positions {max_positions} - {max_new_tokens} new tokens) "
                     f"were cut to {limit}")
    return fitted


def _attention_info(device: torch.device, dtype: torch.dtype) -> dict:
    from ..attention import prefix_backend_name, tree_uses_triton

    return {"hybrid_prefix_backend": prefix_backend_name(device, dtype),
            "hybrid_tree_part": "triton fused_mask_attn" if tree_uses_triton(device) else "pytorch math"}


def _model_name(model, target: str) -> str:
    if target == "embedded":
        from ..embedded import EMBEDDED_GGUF

        return EMBEDDED_GGUF.split(".")[0] + " (embedded)"
    return Path(model.config.name_or_path or target).name


def run_bench(model, tokenizer, args, argv: list[str] | None = None) -> dict:
    """The whole benchmark on an already loaded target; returns the JSON-able result."""
    from ..demo import load_draft_for

    settings = resolve_settings(args)
    notes: list[str] = []
    device = model.device
    dtype = model.get_input_embeddings().weight.dtype
    max_positions = model.config.get_text_config().max_position_embeddings
    lengths = _fit_lengths(settings["lengths"], settings["max_new_tokens"], max_positions, notes)

    torch.manual_seed(args.seed)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        draft, draft_source = load_draft_for(model, args.draft)
    notes += [str(w.message) for w in caught]
    trained = not draft_source.startswith("untrained")
    if not trained:
        notes.append("LongSpec runs use an UNTRAINED draft (tau ~ 1): its speedups say nothing about a trained draft; "
                     "pass --draft PATH to a trained one")

    methods = build_methods(args.methods, draft, args.pld_tokens)
    workloads = build_workloads(tokenizer, lengths, settings["kinds"], settings["prompts_per_length"], args.seed)
    bandwidth = copy_bandwidth(device)
    records = run_methods(model, draft, methods, workloads, BenchSettings(
        settings["max_new_tokens"], settings["warmup_new_tokens"], progress=not args.no_progress))
    rows = summarize(records, methods, bandwidth["bytes_per_s"])
    return {
        "schema": SCHEMA,
        "machine": machine_info(device, argv),
        "settings": {**settings, "lengths": lengths, "methods": [m.name for m in methods], "pld_tokens": args.pld_tokens,
                     "seed": args.seed, "quick": bool(args.quick), "greedy": True},
        "model": {"name": _model_name(model, args.target), "target": args.target,
                  "name_or_path": model.config.name_or_path, "dtype": str(dtype),
                  "weights_bytes": weight_bytes(model), "kv_bytes_per_token": kv_bytes_per_token(model),
                  "max_position_embeddings": max_positions},
        "draft": {"source": draft_source, "trained": trained, "weights_digest": model_weights_digest(draft),
                  "tree_widths": list(draft.config.tree_widths),
                  "parameters": sum(p.numel() for p in draft.parameters())},
        "attention": _attention_info(device, dtype),
        "copy_bandwidth": bandwidth,
        "exactness_metric": {"module": "hf_longspec/metrics/token_exact_match", "backend": token_exact_match().backend},
        "methods": [{"name": m.name, "label": m.label, "attn_implementation": m.attn_implementation,
                     "prefill_backend": m.prefill_backend, "generate_kwargs": m.generate_kwargs} for m in methods],
        "workloads": [{"kind": w.kind, "index": w.index, "length": w.length, "source": w.source} for w in workloads],
        "rows": rows,
        "runs": [r.as_dict() for r in records],
        "notes": notes,
    }


def write_outputs(result: dict, out: Path, plot: bool = True) -> dict[str, Path]:
    """bench.json, bench.md and (when matplotlib is there) speedup.png under `out`."""
    from .plotting import plot_speedups

    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "bench.json", "markdown": out / "bench.md"}
    paths["json"].write_text(json.dumps(result, indent=1, default=str))
    paths["markdown"].write_text(report_text(result) + "\n")
    if plot:
        machine, draft = result["machine"], result["draft"]
        title = (f"{result['model']['name']} on {machine['device_name']}; "
                 f"draft: {draft['source']}; {result['settings']['max_new_tokens']} new tokens, greedy")
        png = plot_speedups(result["rows"], out / "speedup.png", title)
        if png is not None:
            paths["plot"] = png
    return paths


def report_text(result: dict) -> str:
    """Context lines, a legend, then the table (last)."""
    machine, bandwidth, attention = result["machine"], result["copy_bandwidth"], result["attention"]
    lines = [
        (f"device: {machine['device_name']}; torch {machine['torch']}, transformers {machine['transformers']}; "
         f"{machine['date_utc']}"),
        (f"target: {result['model']['name']} ({result['model']['dtype']}); "
         f"draft: {result['draft']['source']}; hybrid attention: prefix {attention['hybrid_prefix_backend']}, "
         f"tree {attention['hybrid_tree_part']}"),
        (f"copy bandwidth (read+write): {bandwidth['bytes_per_s'] / 1e9:.1f} GB/s; exactness: token_exact_match via "
         f"{result['exactness_metric']['backend']}; greedy, {result['settings']['max_new_tokens']} new tokens"),
        ("legend: 'after prefill' = tokens after the first delivery / time after it (measured in the same call); "
         "'x vs' = after-prefill rate over vanilla's on the same prompts; prompt lookup and LongSpec run sdpa "
         "outside the tree, so vanilla sdpa is their same-backend baseline; tokens / target fwd = tau; "
         "achieved GB/s = bytes the target forwards must read (weights + KV) / time after prefill; "
         "memory: CUDA peak above what the call started with, or CPU RSS change"),
        *[f"note: {note}" for note in result["notes"]],
        "",
        markdown_table(result["rows"]),
    ]
    return "\n".join(lines)


def main(args, argv: list[str] | None = None) -> int:
    model, tokenizer = load_target(args)
    result = run_bench(model, tokenizer, args, argv)
    paths = write_outputs(result, Path(args.output), plot=not args.no_plot)
    if not args.no_plot and "plot" not in paths:
        print("speedup.png skipped: matplotlib is not installed (pip install 'hf-longspec[bench]')", file=sys.stderr)
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    print(report_text(result))
    return 0
