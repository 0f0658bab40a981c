"""Per (method, prompt length) rows from the raw runs, and the markdown table printed last.

Rates pool the prompts of a length (total tokens / total seconds). Speedups compare a method
with vanilla on the SAME prompts, against both attention backends, because LongSpec and prompt
lookup run sdpa-style attention (hybrid attention's non-tree path is sdpa) and on some GPUs
eager is the faster vanilla: `speedup_vs_sdpa` is the same-backend number, `speedup_vs_eager`
the one against the other backend.
"""

from __future__ import annotations

from .exactness import token_exact_match
from .methods import VANILLA_EAGER, VANILLA_SDPA, VANILLA_STATIC, Method
from .runner import RunRecord


def _ratio(a, b):
    return a / b if a is not None and b else None


def _pooled(records: list[RunRecord], copy_bytes_per_s: float | None) -> dict:
    wall = sum(r.wall_s for r in records)
    decode = sum(r.decode_s for r in records)
    decode_tokens = sum(r.decode_tokens for r in records)
    decode_forwards = sum(r.decode_forwards for r in records)
    decode_bytes = sum(r.decode_bytes for r in records)
    bandwidth = decode_bytes / decode if decode > 0 else None
    memory = [r.memory for r in records]
    cuda = [m["extra_peak_bytes"] for m in memory if m.get("kind") == "cuda_peak_allocated"]
    rss = [m["rss_delta_bytes"] for m in memory if m.get("rss_delta_bytes") is not None]
    return {
        "prompts": len(records),
        "new_tokens": sum(r.new_tokens for r in records),
        "wall_s": wall,
        "decode_s": decode,
        "tokens_per_s": sum(r.new_tokens for r in records) / wall if wall > 0 else None,
        "decode_tokens_per_s": decode_tokens / decode if decode > 0 else None,
        "target_forwards_after_prefill": decode_forwards,
        "tokens_per_target_forward": decode_tokens / decode_forwards if decode_forwards else None,
        "achieved_bytes_per_s": bandwidth,
        "fraction_of_copy_bandwidth": _ratio(bandwidth, copy_bytes_per_s),
        "peak_extra_bytes": max(cuda) if cuda else None,
        "peak_memory_kind": memory[0].get("kind") if memory else None,
        "rss_delta_bytes": max(rss) if rss else None,
    }


def _exactness(records: list[RunRecord], references: list[RunRecord]) -> dict:
    by_prompt = {(r.kind, r.prompt_index): r.tokens for r in references}
    predictions = [r.tokens for r in records]
    return token_exact_match().compute(predictions, [by_prompt[(r.kind, r.prompt_index)] for r in records])


def summarize(records: list[RunRecord], methods: list[Method], copy_bytes_per_s: float | None) -> list[dict]:
    """One row per (method, length), in method order within each length."""
    rows = []
    for length in sorted({r.length for r in records}):
        at_length = [r for r in records if r.length == length]
        runs = {m.name: [r for r in at_length if r.method == m.name] for m in methods}
        pooled = {name: _pooled(group, copy_bytes_per_s) for name, group in runs.items() if group}
        for method in methods:
            if method.name not in pooled:
                continue
            row = {"method": method.name, "label": method.label, "length": length,
                   "same_backend_vanilla": method.same_backend_vanilla, **pooled[method.name]}
            for backend, vanilla in (("static", VANILLA_STATIC), ("eager", VANILLA_EAGER), ("sdpa", VANILLA_SDPA)):
                base = pooled.get(vanilla, {})
                row[f"speedup_vs_{backend}"] = _ratio(row["decode_tokens_per_s"], base.get("decode_tokens_per_s"))
                row[f"speedup_e2e_vs_{backend}"] = _ratio(row["tokens_per_s"], base.get("tokens_per_s"))
                if method.name != vanilla and runs.get(vanilla):
                    row[f"exactness_vs_{backend}"] = _exactness(runs[method.name], runs[vanilla])
            stats = [r.longspec_stats for r in runs[method.name] if r.longspec_stats]
            if stats:
                rounds = sum(s["rounds"] for s in stats)
                row["longspec_tau"] = sum(s["emitted_tokens"] for s in stats) / rounds if rounds else None
                row["longspec_rounds"] = rounds
                row["longspec_emitted_tokens"] = sum(s["emitted_tokens"] for s in stats)
            rows.append(row)
    return rows


def _fmt(value, spec: str, scale: float = 1.0, missing: str = "-") -> str:
    return missing if value is None else format(value / scale, spec)


def _exact_cell(row: dict) -> str:
    exactness = row.get("exactness_vs_sdpa")
    if exactness is None:
        return "reference"
    if exactness["exact_match"] == 1.0:
        return "yes"
    diverged = [d for d in exactness["first_divergence"] if d >= 0]
    return f"{exactness['exact_match']:.0%} (first diff @{min(diverged)})"


def _memory_cell(row: dict) -> str:
    if row["peak_extra_bytes"] is not None:
        return _fmt(row["peak_extra_bytes"], ".0f", 2**20)
    if row["rss_delta_bytes"] is not None:
        return f"RSS {_fmt(row['rss_delta_bytes'], '+.0f', 2**20)}"
    return "n/a"


def markdown_table(rows: list[dict]) -> str:
    """The summary table: speedups are decode-rate ratios (after prefill) against vanilla; the headline
    one is against vanilla static (the fastest vanilla), vanilla eager's stays in the JSON."""
    header = ("| prompt | method | tok/s | tok/s after prefill | x vs vanilla static | x vs vanilla sdpa "
              "| tokens / target fwd | peak MiB | achieved GB/s (% of copy) | exact vs vanilla sdpa |")
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for row in rows:
        bandwidth = row["achieved_bytes_per_s"]
        share = row["fraction_of_copy_bandwidth"]
        bandwidth_cell = "-" if bandwidth is None else f"{bandwidth / 1e9:.1f} ({_fmt(share, '.0%')})"
        lines.append(
            f"| {row['length']} | {row['label']} | {_fmt(row['tokens_per_s'], '.2f')} "
            f"| {_fmt(row['decode_tokens_per_s'], '.2f')} | {_fmt(row['speedup_vs_static'], '.2f')} "
            f"| {_fmt(row['speedup_vs_sdpa'], '.2f')} | {_fmt(row['tokens_per_target_forward'], '.2f')} "
            f"| {_memory_cell(row)} | {bandwidth_cell} | {_exact_cell(row)} |"
        )
    return "\n".join(lines)
