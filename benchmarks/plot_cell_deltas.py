"""Where did a fine-tune move tau? Per (kind, length) cell, each variant's paired difference from the
starting draft, prompt by prompt, from an ablation.json that measured the start (--eval-start).

    python benchmarks/plot_cell_deltas.py \
        docs/results/session14_2026-12-02/ablation_merged_with_session13.json \
        --out docs/figures/target_writing_cells_h200_2026-12-02.png

The pooled tau of ablate_training.py hides trades between kinds: a variant can gain on prose at 8k
and lose as much on code. Prints a markdown table (mean paired delta, prompt-seed pairs better /
worse) and draws the means with every seed's cell mean as a dot.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def cell_deltas(report: dict) -> list[dict]:
    """Per variant and cell: the paired per-prompt tau differences from the start, over all seeds."""
    start = report["start"]["tau_per_prompt"]
    cells = list(dict.fromkeys((p["kind"], p["length"]) for p in report["prompts"]))
    rows = []
    for variant in dict.fromkeys(run["variant"] for run in report["runs"]):
        for kind, length in cells:
            where = [i for i, p in enumerate(report["prompts"]) if (p["kind"], p["length"]) == (kind, length)]
            per_seed = {run["seed"]: [run["tau_per_prompt"][i] - start[i] for i in where]
                        for run in report["runs"] if run["variant"] == variant}
            deltas = [d for seed_deltas in per_seed.values() for d in seed_deltas]
            rows.append({"variant": variant, "kind": kind, "length": length, "delta_mean": statistics.mean(deltas),
                         "seed_means": {seed: statistics.mean(d) for seed, d in per_seed.items()},
                         "better": sum(d > 0 for d in deltas), "worse": sum(d < 0 for d in deltas)})
    return rows


def markdown(rows: list[dict]) -> str:
    cells = list(dict.fromkeys((row["kind"], row["length"]) for row in rows))
    lines = ["| variant | " + " | ".join(f"{kind} {length}" for kind, length in cells) + " |",
             "|---|" + "---|" * len(cells)]
    for variant in dict.fromkeys(row["variant"] for row in rows):
        mine = {(row["kind"], row["length"]): row for row in rows if row["variant"] == variant}
        lines.append(f"| {variant} | " + " | ".join(
            f"{mine[c]['delta_mean']:+.2f} ({mine[c]['better']}/{mine[c]['worse']})" for c in cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], start_tau: float, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(dict.fromkeys((row["kind"], row["length"]) for row in rows))
    variants = list(dict.fromkeys(row["variant"] for row in rows))
    width = 0.8 / len(variants)
    fig, ax = plt.subplots(figsize=(10, 3.6))
    for v, variant in enumerate(variants):
        mine = {(row["kind"], row["length"]): row for row in rows if row["variant"] == variant}
        xs = [c + (v - (len(variants) - 1) / 2) * width for c in range(len(cells))]
        ax.bar(xs, [mine[cell]["delta_mean"] for cell in cells], width * 0.9, label=variant, color=f"C{v}")
        for x, cell in zip(xs, cells):
            ax.plot([x] * len(mine[cell]["seed_means"]), list(mine[cell]["seed_means"].values()), "k.", ms=3)
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xticks(range(len(cells)), [f"{kind}\n{length}" for kind, length in cells])
    ax.set_ylabel("tau minus the start's, paired")
    ax.set_title(f"per cell against the starting draft (tau {start_tau:.2f}); bars: mean over seeds, dots: each seed")
    ax.legend(fontsize=7, ncol=len(variants))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", help="an ablation.json (ablate_training.py) with the start measured")
    parser.add_argument("--out", default=None, help="PNG to draw (needs matplotlib)")
    args = parser.parse_args(argv)
    report = json.loads(Path(args.report).read_text())
    if "start" not in report:
        parser.error(f"{args.report} did not measure the starting draft (ablate_training.py --eval-start)")
    rows = cell_deltas(report)
    print(markdown(rows))
    if args.out:
        plot(rows, report["start"]["tau"], Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
