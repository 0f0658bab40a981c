"""Summarize the runs of benchmarks/device/x2_train.sh: one JSON and one markdown table.

    python benchmarks/x2_train_report.py --work /tmp/x2_work --out $OUT/x2_train single dp fsdp

Each run NAME is the `hf-longspec train` output folder WORK/NAME (its final/ folder holds
training_speed.json, training_log.json and model.safetensors); WORK/status.tsv holds one line
"NAME EXIT_CODE WALL_SECONDS" per launch. The weights of dp and fsdp are compared (max abs
difference), and single against dp as the floor that bf16 reduction order alone gives.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from safetensors.torch import load_file


def load_run(work: Path, name: str, status: dict) -> dict:
    final = work / name / "final"
    row = {"name": name, "exit_code": status.get(name, (None, None))[0], "wall_seconds": status.get(name, (None, None))[1]}
    if not (final / "training_speed.json").is_file():
        return {**row, "finished": False}
    speed = json.loads((final / "training_speed.json").read_text())
    log = json.loads((final / "training_log.json").read_text())
    return {**row, "finished": True, **speed,
            "loss": {int(e["step"]): e["loss"] for e in log if "loss" in e},
            "train_runtime": next((e["train_runtime"] for e in log if "train_runtime" in e), None)}


def max_abs_difference(work: Path, a: str, b: str) -> dict | None:
    paths = [work / name / "final" / "model.safetensors" for name in (a, b)]
    if not all(p.is_file() for p in paths):
        return None
    first, second = (load_file(p) for p in paths)
    if first.keys() != second.keys():
        return {"error": "different tensor names"}
    gap = max((first[k].float() - second[k].float()).abs().max().item() for k in first)
    scale = max(first[k].float().abs().max().item() for k in first)
    return {"runs": [a, b], "max_abs_difference": gap, "max_abs_weight": scale}


def markdown(report: dict) -> str:
    runs = report["runs"]
    common = set.intersection(*(set(r.get("loss", {})) for r in runs))
    shown = sorted(common)[-3:]  # the last three logged steps that every run reached
    head = ["run", "world", "fsdp", "steps", "tokens/s (after warm-up)", "s/step", "peak GPU GiB per rank",
            *(f"loss @{s}" for s in shown), "wall s", "exit"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in runs:
        if not r["finished"]:
            cells = [r["name"], "", "", "not finished", *[""] * (3 + len(shown))]
        else:
            peaks = ", ".join(f"{p:.2f}" if p is not None else "-" for p in r["peak_gpu_memory_gib_per_rank"])
            cells = [r["name"], r["world_size"], r["fsdp"], r["steps"], f"{r['tokens_per_second']:,.0f}",
                     f"{r['seconds_per_step']:.4f}", peaks, *(f"{r['loss'][s]:.4f}" for s in shown)]
        lines.append("| " + " | ".join(str(c) for c in [*cells, r["wall_seconds"], r["exit_code"]]) + " |")
    lines.append("")
    for cmp in report["weights"]:
        if cmp and "max_abs_difference" in cmp:
            lines.append(f"final weights {cmp['runs'][0]} vs {cmp['runs'][1]}: max abs difference "
                         f"{cmp['max_abs_difference']:.3g} (largest weight {cmp['max_abs_weight']:.3g})  ")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--meta", default=None, help="a JSON file of facts to include (machine, command, ...)")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args()
    work, out = Path(args.work), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    status = {}
    if (work / "status.tsv").is_file():
        for line in (work / "status.tsv").read_text().splitlines():
            name, code, wall = line.split()
            status[name] = (int(code), int(wall))
    report = {
        "meta": json.loads(Path(args.meta).read_text()) if args.meta else {},
        "runs": [load_run(work, name, status) for name in args.runs],
        "weights": [max_abs_difference(work, "dp", "fsdp"), max_abs_difference(work, "single", "dp")],
        "versions": {"torch": torch.__version__},
    }
    (out / "x2_train.json").write_text(json.dumps(report, indent=2))
    (out / "x2_train.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
