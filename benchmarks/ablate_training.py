"""A training ablation with seeds: each variant of a base recipe, trained once per seed from the same
start, then held-out tau of every run on the same eval-split prompts.

    PYTHONPATH=src python benchmarks/ablate_training.py --out $OUT/ablation --init-draft embedded \
        --steps 200 --seeds 0 1 --corpus-mix chat --chat-data /tmp/chat/chat_train.jsonl \
        --variant base --variant "rollout2=rollout_steps:2" --variant "seq4k=seq_len:4096,batch_size:8"
    PYTHONPATH=src python benchmarks/ablate_training.py --out /tmp/ablation --quick     # CPU smoke run

Why: the draft-quality issue asks that every training claim rest on an ablation with two seeds or
more. One seed cannot separate differences of ~0.2 tau (docs/training.md), so this script reports,
per variant, the mean over seeds, the spread between seeds and the paired per-prompt difference
against the first variant (same prompts, same seed), and draws both.

A variant is NAME=field:value,field:value over the TrainRecipe fields (values parsed as JSON when
they parse: 2, 4096, true, "argmax"); "base" alone is the base recipe. The seed changes the training
(data order, noise shifts, and the initial weights of an untrained draft); the token chunks of one
data setting are built once, from seed 0, and shared by all its runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.embedded import load_embedded_target
from hf_longspec.evaluation import held_out_prompts, measure_tau
from hf_longspec.training.run import TrainRecipe, build_dataset, train_draft

# the recipe fields that decide the token chunks: runs that agree on them share one dataset
DATA_FIELDS = ("seq_len", "max_tokens", "kinds", "corpus_mix", "chat_data", "corpus_max_epochs", "chat_windows")


def parse_variant(text: str) -> tuple[str, dict]:
    """'rollout2=rollout_steps:2,rollout_decay:0.5' -> ('rollout2', {...}); 'base' -> ('base', {})."""
    name, _, body = text.partition("=")
    if not name:
        raise ValueError(f"a variant needs a name: {text!r} (NAME or NAME=field:value,...)")
    known = {f.name for f in fields(TrainRecipe)} - {"output_dir", "seed"}
    overrides = {}
    for item in filter(None, body.split(",")):
        key, sep, value = item.partition(":")
        if not sep or key not in known:
            raise ValueError(f"variant {name!r}: {item!r} is not field:value over a TrainRecipe field; "
                             f"allowed fields: {', '.join(sorted(known))}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return name, overrides


def summarize(runs: list[dict]) -> list[dict]:
    """Per variant: tau mean over seeds, min and max, and the mean paired per-prompt difference
    against the first variant's run of the same seed."""
    names = list(dict.fromkeys(run["variant"] for run in runs))
    reference = {run["seed"]: run for run in runs if run["variant"] == names[0]}
    rows = []
    for name in names:
        mine = [run for run in runs if run["variant"] == name]
        taus = [run["tau"] for run in mine]
        paired = [mine_tau - ref_tau for run in mine if run["seed"] in reference
                  for mine_tau, ref_tau in zip(run["tau_per_prompt"], reference[run["seed"]]["tau_per_prompt"])]
        rows.append({"variant": name, "seeds": [run["seed"] for run in mine], "tau_mean": statistics.mean(taus),
                     "tau_min": min(taus), "tau_max": max(taus),
                     "paired_delta_mean": statistics.mean(paired) if paired else None,
                     "prompts_better": sum(d > 0 for d in paired), "prompts_worse": sum(d < 0 for d in paired)})
    return rows


def table(rows: list[dict]) -> str:
    lines = ["| variant | seeds | tau mean | tau min-max | paired delta vs first | prompts better / worse |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        delta = "-" if row["paired_delta_mean"] is None else f"{row['paired_delta_mean']:+.3f}"
        lines.append(f"| {row['variant']} | {len(row['seeds'])} | {row['tau_mean']:.3f} | {row['tau_min']:.2f}-"
                     f"{row['tau_max']:.2f} | {delta} | {row['prompts_better']} / {row['prompts_worse']} |")
    return "\n".join(lines)


def plot(report: dict, path: Path) -> None:
    """Loss against steps per run, and tau per variant with every seed's point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss_ax, tau_ax) = plt.subplots(1, 2, figsize=(13, 4.5))
    names = [row["variant"] for row in report["summary"]]
    for run in report["runs"]:
        if run["loss"]:
            steps, values = zip(*run["loss"])
            loss_ax.plot(steps, values, label=f"{run['variant']} seed {run['seed']}",
                         color=f"C{names.index(run['variant'])}", alpha=0.6 + 0.4 * (run["seed"] == 0))
    loss_ax.set(xlabel="optimizer step", ylabel="training loss", title="loss against steps")
    loss_ax.legend(fontsize=7)
    for index, row in enumerate(report["summary"]):
        taus = [run["tau"] for run in report["runs"] if run["variant"] == row["variant"]]
        tau_ax.scatter(taus, [index] * len(taus), color=f"C{index}")
        tau_ax.plot([row["tau_mean"]] * 2, [index - 0.3, index + 0.3], color=f"C{index}")
    tau_ax.set_yticks(range(len(names)), names)
    tau_ax.set(xlabel="held-out tau (greedy, default tree); dots: seeds, bar: mean", title="acceptance")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_report(report: dict, out: Path, started: float) -> None:
    """ablation.json with the runs so far and their summary."""
    report["summary"] = summarize(report["runs"])
    report["seconds"] = time.perf_counter() - started
    (out / "ablation.json").write_text(json.dumps(report, indent=2))


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder: ablation.json, ablation.png, runs/")
    parser.add_argument("--init-draft", default="embedded", help="'embedded', a draft folder, or 'untrained'")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--variant", action="append", default=[], help="NAME or NAME=field:value,... (repeatable)")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=10_000_000)
    parser.add_argument("--corpus-mix", default=None)
    parser.add_argument("--chat-data", nargs="*", default=[])
    parser.add_argument("--eval-lengths", type=int, nargs="+", default=[2048, 4096, 8000])
    parser.add_argument("--eval-kinds", nargs="+", default=["code", "prose"])
    parser.add_argument("--eval-prompts", type=int, default=2, help="prompts per (kind, length)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--quick", action="store_true", help="tiny CPU smoke run: 2 steps, one short prompt")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps, args.seq_len, args.batch_size, args.max_tokens, args.warmup_steps = 2, 64, 2, 4_000, 0
        args.eval_lengths, args.eval_kinds, args.eval_prompts, args.new_tokens = [200], ["code"], 1, 6
        args.seeds = args.seeds[:2]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    variants = [parse_variant(text) for text in (args.variant or ["base"])]
    if len({name for name, _ in variants}) < len(variants):
        raise ValueError(f"variant names repeat: {[name for name, _ in variants]}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    target, tokenizer = load_embedded_target()
    prompts = held_out_prompts(tokenizer, lengths=tuple(args.eval_lengths), kinds=tuple(args.eval_kinds),
                               per_cell=args.eval_prompts, device=target.device)
    base = TrainRecipe(output_dir="", max_steps=args.steps, seq_len=args.seq_len, batch_size=args.batch_size,
                       learning_rate=args.lr, warmup_steps=args.warmup_steps, max_tokens=args.max_tokens,
                       corpus_mix=args.corpus_mix, chat_data=list(args.chat_data), save_steps=10**9,
                       logging_steps=max(1, args.steps // 20), overwrite_output=True,
                       init_draft=None if args.init_draft == "untrained" else args.init_draft)
    report = {"machine": machine_info(target.device), "settings": {**vars(args), "variants": dict(variants)},
              "prompts": [{"kind": kind, "length": length} for kind, length, _ in prompts], "runs": []}
    datasets = {}
    # seed by seed, each seed's variants together, and the report rewritten after every run: a run cut
    # short by a time limit keeps complete pairs
    for seed in args.seeds:
        for name, overrides in variants:
            if "kinds" in overrides and "corpus_mix" not in overrides:
                overrides = {**overrides, "corpus_mix": None}  # kinds name the text only without a mix
            recipe = replace(base, output_dir=str(out / "runs" / f"{name}-seed{seed}"), seed=seed, **overrides)
            key = json.dumps({f: getattr(recipe, f) for f in DATA_FIELDS}, sort_keys=True)
            if key not in datasets:
                datasets[key] = build_dataset(tokenizer, replace(recipe, seed=0))
            begin = time.perf_counter()
            draft = train_draft(target, tokenizer, recipe, dataset=datasets[key], progress=False)
            train_seconds = time.perf_counter() - begin
            draft.to(target.dtype).eval().bind(target)
            # uncompiled rounds: tau does not depend on compiling, and each new draft would compile anew
            tau = measure_tau(target, draft, prompts, max_new_tokens=args.new_tokens, longspec_compile=False)
            log = json.loads((Path(recipe.output_dir) / "final" / "training_log.json").read_text())
            report["runs"].append({
                "variant": name, "seed": seed, "recipe": asdict(recipe), "train_seconds": train_seconds,
                "tau": tau["tau"], "tau_per_prompt": [row["tau"] for row in tau["per_prompt"]],
                "loss": [(entry["step"], entry["loss"]) for entry in log if "loss" in entry],
            })
            print(f"{name} seed {seed}: tau {tau['tau']:.3f} ({train_seconds:.0f} s of training)", flush=True)
            del draft
            if target.device.type == "cuda":
                torch.cuda.empty_cache()
            write_report(report, out, started)
    try:
        plot(report, out / "ablation.png")
    except ImportError:  # matplotlib is the [bench] extra
        print("matplotlib missing: no plot")
    print("\n" + table(report["summary"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
