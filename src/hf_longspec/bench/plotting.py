"""Speedup vs prompt length, one line per method (matplotlib, Agg; the optional `bench` extra)."""

from __future__ import annotations

from pathlib import Path


def plot_speedups(rows: list[dict], path: Path, title: str) -> Path | None:
    """Two panels: speedup vs vanilla sdpa (the same backend as prompt lookup and LongSpec) and vs eager.

    Solid = after prefill, dashed = end to end. Returns None when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    methods = list(dict.fromkeys(r["method"] for r in rows))
    colors = {method: f"C{index}" for index, method in enumerate(methods)}  # same colour in both panels
    all_lengths = sorted({r["length"] for r in rows})
    figure, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for axis, backend in zip(axes, ("sdpa", "eager")):
        for method in methods:
            if method == f"vanilla_{backend}":
                continue
            mine = sorted((r for r in rows if r["method"] == method), key=lambda r: r["length"])
            lengths = [r["length"] for r in mine]
            axis.plot(lengths, [r[f"speedup_vs_{backend}"] for r in mine], marker="o", color=colors[method],
                      label=mine[0]["label"])
            axis.plot(lengths, [r[f"speedup_e2e_vs_{backend}"] for r in mine], linestyle="--", color=colors[method],
                      alpha=0.6)
        axis.axhline(1.0, color="grey", linewidth=0.8)
        axis.set_xscale("log", base=2)
        axis.set_xticks(all_lengths, [str(length) for length in all_lengths])
        axis.minorticks_off()
        axis.set_xlabel("prompt length (tokens)")
        axis.set_title(f"vs vanilla {backend}" + (" (same backend as prompt lookup / LongSpec)" if backend == "sdpa" else ""))
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=8)
    axes[0].set_ylabel("speedup (solid: after prefill, dashed: end to end)")
    figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
