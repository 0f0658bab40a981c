"""Plot the batch benchmark (benchmarks/batch_bench.py JSON files): decode tokens/s of batched vanilla
static and of LongSpec per batch size, and LongSpec's speedup, one line per prompt length.

    python benchmarks/plot_batch.py docs/results/batch_bench_h200_8000_2026-11-30.json \
        docs/results/batch_bench_h200_4096.json --out docs/figures/batch_h200.png

Crosses: batch 1's speedup on the prompts of that batch, each run alone (batch_bench.py since 2026-12-01).
"""

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("results", nargs="+")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    rows = []
    for path in args.results:  # one line per (run date, prompt length)
        result = json.loads(Path(path).read_text())
        machine = result.get("machine", {})
        date = (machine[0] if isinstance(machine, list) else machine).get("date_utc", "")[:10]
        rows += [{**row, "label": f"{row['length']} tokens, {date}"} for row in result["rows"]]
    figure, (throughput, speedup) = plt.subplots(1, 2, figsize=(11, 4))
    for label in sorted({r["label"] for r in rows}):
        mine = sorted((r for r in rows if r["label"] == label), key=lambda r: r["batch"])
        batches = [r["batch"] for r in mine]
        throughput.plot(batches, [r["vanilla_static_decode_tokens_per_s"] for r in mine], "--o",
                        label=f"vanilla static, {label}")
        throughput.plot(batches, [r["longspec_decode_tokens_per_s"] for r in mine], "-o", label=f"LongSpec, {label}")
        speedup.plot(batches, [r["speedup"] for r in mine], "-o", label=f"default tree, {label}")
        same = [(r["batch"], r["batch1_speedup_same_prompts"]) for r in mine if "batch1_speedup_same_prompts" in r]
        if same:  # batch 1's speedup on the prompts of each larger batch, each prompt run alone
            speedup.plot(*zip(*same), "x", markersize=10, label=f"batch 1 on the same prompts, {label}")
        for key in sorted({k for r in mine for k in r if k.startswith("speedup_n")}):  # --max-nodes variants
            points = [(r["batch"], r[key]) for r in mine if key in r]
            speedup.plot(*zip(*points), "*", markersize=11, label=f"tree cut to {key[len('speedup_n'):]} nodes, {label}")
    throughput.set(xlabel="batch size", ylabel="decode tokens/s (whole batch)", xscale="log", title="Throughput")
    speedup.axhline(1.0, color="gray", lw=0.8)
    speedup.set(xlabel="batch size", ylabel="LongSpec / vanilla static", xscale="log", title="Speedup", ylim=(0, None))
    ticks = sorted({r["batch"] for r in rows})
    for axis in (throughput, speedup):
        axis.set_xticks(ticks, [str(b) for b in ticks])
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
