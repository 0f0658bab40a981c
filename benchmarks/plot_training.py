"""Plot the training ablation (loss against steps, tau per run) from train_smollm2_draft.py's JSON.

    python benchmarks/plot_training.py docs/results/training_ablation_h200.json docs/results/training_main_h200.json \
        --out docs/figures/training_ablation.png
"""

from __future__ import annotations

import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    runs = []
    for path in args.reports:
        report = json.load(open(path))
        runs.append((f"main, {report['main']['steps']} steps", report["main"]["loss"], report["main"]["tau"]["tau"]))
        for row in report.get("ablation", []):
            runs.append((row["name"], row["loss"], row["tau"]))
    fig, (loss_ax, tau_ax) = plt.subplots(1, 2, figsize=(13, 4.5))
    for name, loss, _ in runs:
        steps, values = zip(*loss)
        loss_ax.plot(steps, values, label=name)
    loss_ax.set(xlabel="optimizer step", ylabel="training loss", yscale="log", title="loss against steps")
    loss_ax.legend(fontsize=8)
    names = [name for name, _, _ in runs]
    tau_ax.barh(names, [tau for _, _, tau in runs])
    tau_ax.set(xlabel="tau (greedy, default tree, held-out 2k-8k code+prose)", title="acceptance")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
