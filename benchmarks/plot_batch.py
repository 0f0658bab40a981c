"""Plot the batch benchmark (benchmarks/batch_bench.py JSON files): decode tokens/s of batched vanilla
static and of LongSpec per batch size, and LongSpec's speedup, one line per prompt length.

    python benchmarks/plot_batch.py docs/results/batch_bench_h200_4096.json docs/results/batch_bench_h200_8000.json \
        --out docs/figures/batch_h200.png
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
    rows = [row for path in args.results for row in json.loads(Path(path).read_text())["rows"]]
    figure, (throughput, speedup) = plt.subplots(1, 2, figsize=(11, 4))
    for length in sorted({r["length"] for r in rows}):
        mine = sorted((r for r in rows if r["length"] == length), key=lambda r: r["batch"])
        batches = [r["batch"] for r in mine]
        throughput.plot(batches, [r["vanilla_static_decode_tokens_per_s"] for r in mine], "--o",
                        label=f"vanilla static, {length} tokens")
        throughput.plot(batches, [r["longspec_decode_tokens_per_s"] for r in mine], "-o", label=f"LongSpec, {length} tokens")
        speedup.plot(batches, [r["speedup"] for r in mine], "-o", label=f"{length}-token prompts")
    throughput.set(xlabel="batch size", ylabel="decode tokens/s (whole batch)", xscale="log", title="Throughput")
    speedup.axhline(1.0, color="gray", lw=0.8)
    speedup.set(xlabel="batch size", ylabel="LongSpec / vanilla static", xscale="log", title="Speedup", ylim=(0, None))
    for axis in (throughput, speedup):
        axis.set_xticks(batches, [str(b) for b in batches])
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)


if __name__ == "__main__":
    main()
