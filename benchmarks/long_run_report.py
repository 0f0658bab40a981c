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

A run whose checkpoint stayed on the machine (a wider draft's: eighteenth session) gives the returned
draft folder instead: `--draft-folder final_bf16` (its training_log.json holds the same log). Another long
run of the same recipe is drawn and paired beside it with `--baseline-eval` (its eval file) and
`--baseline-report` (its long_run.json, for the loss curve):

    python benchmarks/long_run_report.py --draft-folder final_bf16 --calls ... --eval-long eval_long.json \
        --eval-shipped eval_shipped.json --baseline-name "plain 12k" \
        --baseline-eval session15/eval_long.json --baseline-report session15/long_run.json --out ...
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


def comparison(long: dict, shipped: dict, name: str = "long run") -> dict:
    """The long run's draft as a run against the shipped draft as the start, in ablate_training's
    report shape, so its tables and plot_cell_deltas apply; refused unless the prompts are the same."""
    for key in _EVAL_SETTINGS:
        if long["settings"].get(key) != shipped["settings"].get(key):
            raise SystemExit(f"the eval files measured different prompts: {key} is {long['settings'].get(key)!r} "
                             f"and {shipped['settings'].get(key)!r}; allowed: two ablate_training.py --eval-only "
                             "files with the same eval settings")
    if not same_prompts(long["prompts"], shipped["prompts"]):
        raise SystemExit("the eval files list different prompts; allowed: the same prompts in the same order")
    run = {"variant": name, "seed": 0, **long["start"]}
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


def run_state(trainer_state: str | None, draft_folder: str | None) -> dict:
    """The run's global_step, max_steps, epoch and log_history: from the last checkpoint's Trainer state,
    or from the finished draft folder (training_log.json, training_speed.json, training_recipe.json)."""
    if (trainer_state is None) == (draft_folder is None):
        raise SystemExit("give one of --trainer-state (a checkpoint's trainer_state.json) or --draft-folder "
                         "(a finished draft folder with training_log.json)")
    if trainer_state is not None:
        return json.loads(Path(trainer_state).read_text())
    folder = Path(draft_folder)
    missing = [name for name in ("training_log.json", "training_speed.json", "training_recipe.json")
               if not (folder / name).is_file()]
    if missing:
        raise SystemExit(f"{folder} lacks {', '.join(missing)}; allowed: a draft folder that hf-longspec train saved")
    log = json.loads((folder / "training_log.json").read_text())
    return {"global_step": json.loads((folder / "training_speed.json").read_text())["global_step"],
            "max_steps": json.loads((folder / "training_recipe.json").read_text())["max_steps"],
            "epoch": log[-1]["epoch"], "log_history": log}


def baseline(name: str, eval_path: str, report_path: str | None, long: dict, run_name: str) -> dict:
    """Another long run (its eval file, and its long_run.json for the loss) as the start this run's draft
    is paired against, prompt by prompt."""
    other = comparison(long, json.loads(Path(eval_path).read_text()), run_name)
    loss = json.loads(Path(report_path).read_text())["loss"] if report_path else None
    return {"name": name, "eval": eval_path, "loss": loss, **other}


def plot(report: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, tau_ax) = plt.subplots(1, 2, figsize=(12, 4.2))
    steps, losses = zip(*report["loss"])
    loss_ax.plot(steps, losses, lw=1, label=report["name"])
    base = report.get("baseline")
    if base and base["loss"]:
        base_steps, base_losses = zip(*base["loss"])
        loss_ax.plot(base_steps, base_losses, lw=1, color="grey", label=base["name"])
        loss_ax.legend(fontsize=8)
    for row in report["calls"][:-1]:
        loss_ax.axvline(row["to_step"], color="grey", lw=0.6, ls="--")
    top = 4.0  # the first few hundred steps (from ~11) would flatten the rest
    loss_ax.set(xlabel="step (16 x 2048 tokens)", ylabel="training loss", ylim=(min(losses) - 0.2, top),
                title="")
    loss_ax.set_title(f"{report['name']} from an untrained draft (dashed: a new call)", fontsize=9)
    early = [step for step, loss in report["loss"] if loss > top]
    if early:
        loss_ax.text(0.98, 0.95, f"steps <= {max(early)} above the frame", transform=loss_ax.transAxes,
                     ha="right", va="top", fontsize=8)
    cells = list(dict.fromkeys((p["kind"], p["length"]) for p in report["comparison"]["prompts"]))
    start, run = report["comparison"]["start"], report["comparison"]["runs"][0]
    bars = [("shipped draft", start)] + ([(base["name"], base["start"])] if base else []) + [(report["name"], run)]
    width = 0.8 / len(bars)
    for index, (name, row) in enumerate(bars):
        tau_ax.bar([c + (index - (len(bars) - 1) / 2) * width for c in range(len(cells))],
                   [row["tau_per_cell"][kind][str(length)] for kind, length in cells], width * 0.95,
                   label=f"{name} (pooled {row['tau']:.2f})")
    tau_ax.set_xticks(range(len(cells)), [f"{kind}\n{length}" for kind, length in cells])
    tau_ax.set(ylabel="tau, tree alone", title="held-out tau, 6 prompts per cell, 96 new tokens")
    tau_ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trainer-state", default=None, help="the last checkpoint's trainer_state.json")
    parser.add_argument("--draft-folder", default=None,
                        help="instead: the finished draft folder (its training_log.json holds the Trainer log)")
    parser.add_argument("--calls", nargs="*", default=[], help="the calls' summary.json files, in order")
    parser.add_argument("--eval-long", required=True)
    parser.add_argument("--eval-shipped", required=True)
    parser.add_argument("--baseline-eval", default=None, help="another long run's eval file, paired against this one")
    parser.add_argument("--baseline-report", default=None, help="that run's long_run.json (its loss curve)")
    parser.add_argument("--baseline-name", default="baseline run")
    parser.add_argument("--name", default="long run", help="this run's name in the tables and the figure")
    parser.add_argument("--out", required=True, help="folder: long_run.json, long_run.png")
    parser.add_argument("--figure", default=None, help="PNG path (default OUT/long_run.png)")
    args = parser.parse_args(argv)
    state = run_state(args.trainer_state, args.draft_folder)
    long = json.loads(Path(args.eval_long).read_text())
    compared = comparison(long, json.loads(Path(args.eval_shipped).read_text()), args.name)
    report = {"name": args.name, "global_step": state["global_step"], "max_steps": state["max_steps"], "epoch": state["epoch"],
              "loss": [(entry["step"], entry["loss"]) for entry in state["log_history"] if "loss" in entry],
              "calls": call_rows([json.loads(Path(p).read_text()) for p in args.calls], state["global_step"]),
              "comparison": compared}
    if args.baseline_eval:
        report["baseline"] = baseline(args.baseline_name, args.baseline_eval, args.baseline_report, long, args.name)
    elif args.baseline_report:
        raise SystemExit("--baseline-report draws the loss of the run --baseline-eval measured: give both")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "long_run.json").write_text(json.dumps(report, indent=2))
    row = compared["against_start"][0]
    print(f"long run: {state['global_step']} of {state['max_steps']} steps, {state['epoch']:.2f} epochs, "
          f"last loss {report['loss'][-1][1]:.3f}")
    print(f"tau {compared['runs'][0]['tau']:.3f} against the shipped {compared['start']['tau']:.3f}: paired "
          f"{row['paired_delta_mean']:+.3f}, prompts better / worse {row['prompts_better']} / {row['prompts_worse']}")
    print("\n" + cell_table([{"variant": "shipped", **cell_summary([compared["start"]])},
                             {"variant": args.name, **cell_summary(compared["runs"])}]))
    print("\npaired per cell (better/worse)\n" + markdown(compared["cells"]))
    if "baseline" in report:
        base = report["baseline"]
        row = base["against_start"][0]
        print(f"\nagainst {base['name']} (tau {base['start']['tau']:.3f}): paired {row['paired_delta_mean']:+.3f}, "
              f"prompts better / worse {row['prompts_better']} / {row['prompts_worse']}")
        print(markdown(base["cells"]))
    try:
        plot(report, Path(args.figure) if args.figure else out / "long_run.png")
    except ImportError:  # matplotlib is the [bench] extra
        print("matplotlib missing: no plot")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
