"""The long from-scratch run (benchmarks/device/x2_train_long.sh, continued over several calls): its
loss, the speed of each call, and its draft against the shipped one on the ablations' prompts, in one
JSON and one figure.

    python benchmarks/long_run_report.py --trainer-state CKPT/trainer_state.json \
        --calls call1/summary.json call2/summary.json ... \
        --eval-long eval_long.json --eval-shipped eval_shipped.json --out docs/results/session15_2026-12-02

The two eval files come from `ablate_training.py --eval-only` (benchmarks/device/eval_long_run.sh) on
the same prompts, so the drafts pair prompt by prompt, the way every fine-tune since the eleventh
session was judged against the shipped draft. The loss is the last checkpoint's Trainer log, which
carries every call's entries; a call's boundary is the global step its summary ends at.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hf_longspec.evaluation import known_digests, same_prompts

sys.path.insert(0, str(Path(__file__).parent))
from ablate_training import against_start, cell_summary, cell_table  # noqa: E402
from plot_cell_deltas import cell_deltas, markdown  # noqa: E402

# the eval settings that decide the prompts and what tau means; the two files must agree on them
_EVAL_SETTINGS = ("eval_kinds", "eval_lengths", "eval_prompts", "new_tokens", "lookup_tokens")


def comparison(long: dict, shipped: dict) -> dict:
    """The long run's draft as a run against the shipped draft as the start, in ablate_training's
    report shape, so its tables and plot_cell_deltas apply; refused unless the prompts are the same."""
    for key in _EVAL_SETTINGS:
        if long["settings"].get(key) != shipped["settings"].get(key):
            raise SystemExit(f"the eval files measured different prompts: {key} is {long['settings'].get(key)!r} "
                             f"and {shipped['settings'].get(key)!r}; allowed: two ablate_training.py --eval-only "
                             "files with the same eval settings")
    if not same_prompts(long["prompts"], shipped["prompts"]):
        raise SystemExit("the eval files list different prompts; allowed: the same prompts in the same order")
    run = {"variant": "long run", "seed": 0, **long["start"]}
    report = {"start": shipped["start"], "prompts": known_digests(shipped["prompts"], long["prompts"]), "runs": [run]}
    return {**report, "against_start": against_start([run], shipped["start"]), "cells": cell_deltas(report)}


def call_rows(summaries: list[dict], final_step: int) -> list[dict]:
    """Per call: steps, training seconds, s/step, tokens/s and peak memory (from its summary.json);
    a last call whose summary did not come back is the steps from the previous call to `final_step`."""
    rows, previous = [], 0
    for summary in summaries:
        speed = summary["speed"]
        rows.append({"from_step": previous, "to_step": speed["global_step"], "steps": speed["steps"],
                     "train_seconds": speed["all_steps_seconds"], "seconds_per_step": speed["seconds_per_step"],
                     "tokens_per_second": speed["tokens_per_second"],
                     "peak_gpu_memory_gib": max(speed["peak_gpu_memory_gib_per_rank"])})
        previous = speed["global_step"]
    if final_step > previous:
        rows.append({"from_step": previous, "to_step": final_step, "steps": final_step - previous,
                     "summary": "not returned"})
    return rows


def plot(report: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, tau_ax) = plt.subplots(1, 2, figsize=(12, 4.2))
    steps, losses = zip(*report["loss"])
    loss_ax.plot(steps, losses, lw=1)
    for row in report["calls"][:-1]:
        loss_ax.axvline(row["to_step"], color="grey", lw=0.6, ls="--")
    top = 4.0  # the first few hundred steps (from ~11) would flatten the rest
    loss_ax.set(xlabel="step (16 x 2048 tokens)", ylabel="training loss", ylim=(min(losses) - 0.2, top),
                title="the long run from an untrained draft (dashed: a new call)")
    early = [step for step, loss in report["loss"] if loss > top]
    if early:
        loss_ax.text(0.98, 0.95, f"steps <= {max(early)} above the frame", transform=loss_ax.transAxes,
                     ha="right", va="top", fontsize=8)
    cells = list(dict.fromkeys((p["kind"], p["length"]) for p in report["comparison"]["prompts"]))
    start, run = report["comparison"]["start"], report["comparison"]["runs"][0]
    for offset, (name, row) in zip((-0.2, 0.2), (("shipped draft", start), ("long run", run))):
        tau_ax.bar([c + offset for c in range(len(cells))],
                   [row["tau_per_cell"][kind][str(length)] for kind, length in cells], 0.38,
                   label=f"{name} (pooled {row['tau']:.2f})")
    tau_ax.set_xticks(range(len(cells)), [f"{kind}\n{length}" for kind, length in cells])
    tau_ax.set(ylabel="tau, tree alone", title="held-out tau, 6 prompts per cell, 96 new tokens")
    tau_ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trainer-state", required=True, help="the last checkpoint's trainer_state.json")
    parser.add_argument("--calls", nargs="*", default=[], help="the calls' summary.json files, in order")
    parser.add_argument("--eval-long", required=True)
    parser.add_argument("--eval-shipped", required=True)
    parser.add_argument("--out", required=True, help="folder: long_run.json, long_run.png")
    parser.add_argument("--figure", default=None, help="PNG path (default OUT/long_run.png)")
    args = parser.parse_args(argv)
    state = json.loads(Path(args.trainer_state).read_text())
    compared = comparison(json.loads(Path(args.eval_long).read_text()), json.loads(Path(args.eval_shipped).read_text()))
    report = {"global_step": state["global_step"], "max_steps": state["max_steps"], "epoch": state["epoch"],
              "loss": [(entry["step"], entry["loss"]) for entry in state["log_history"] if "loss" in entry],
              "calls": call_rows([json.loads(Path(p).read_text()) for p in args.calls], state["global_step"]),
              "comparison": compared}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "long_run.json").write_text(json.dumps(report, indent=2))
    row = compared["against_start"][0]
    print(f"long run: {state['global_step']} of {state['max_steps']} steps, {state['epoch']:.2f} epochs, "
          f"last loss {report['loss'][-1][1]:.3f}")
    print(f"tau {compared['runs'][0]['tau']:.3f} against the shipped {compared['start']['tau']:.3f}: paired "
          f"{row['paired_delta_mean']:+.3f}, prompts better / worse {row['prompts_better']} / {row['prompts_worse']}")
    print("\n" + cell_table([{"variant": "shipped", **cell_summary([compared["start"]])},
                             {"variant": "long run", **cell_summary(compared["runs"])}]))
    print("\npaired per cell (better/worse)\n" + markdown(compared["cells"]))
    try:
        plot(report, Path(args.figure) if args.figure else out / "long_run.png")
    except ImportError:  # matplotlib is the [bench] extra
        print("matplotlib missing: no plot")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
