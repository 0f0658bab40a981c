"""Is a fall of tau from 2k to 8k the draft's, or the target's? The draft's hits set beside the target's certainty.

    PYTHONPATH=src python benchmarks/certainty_strata.py RUN [RUN ...] --out DIR [--short 2048] [--long 8000] \
        [--kinds prose] [--edges 0.3 0.5 0.7 0.9]

RUN: a `tau_curve.py --check-exact --lookup-tokens 0` result (tau_curve.json, or the runs.jsonl a cut run
left). Each of its records holds the lengths of its rounds in order and the target's probability of its
greedy token at every step, so every output position the draft was asked about is known, with how sure
the target was there:
- a round that emitted e tokens accepted e - 1 drafted ones (hits at depths 1..e - 1) and then missed at
  depth e, unless e - 1 is the tree's depth (the target's token came after a full path: nothing asked);
- a row's last round is left out (a stop may have cut it), and so is every position from the first one
  where the speculative output left plain generate's (bf16 near-ties): past it the steps do not align.

A draft cannot hit where the target itself hesitates as often as where it is sure. So per length the
hit rate is given per bin of the target's certainty, and the long prompts' rate is also given
standardized: its per-bin rates weighted by the short prompts' share of positions per bin. If the
standardized rate equals the short prompts' rate, the fall is all in the target's certainty (what it
writes after the longer context), none in the draft; if it stays below, the draft reads the longer
context worse. Only (kind, index) pairs measured at both lengths count, a pair of prompts that another
index cut identically once (as tau_curve.py counts them); the 95% intervals come from a paired bootstrap
over those pairs (seeded).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from hf_longspec.evaluation import load_run_records

DEFAULT_EDGES = (0.3, 0.5, 0.7, 0.9)


def position_outcomes(record: dict, depth: int) -> list[tuple[float, int, bool]]:
    """(target's certainty, depth asked, hit) for each output position the draft was asked about."""
    if "round_lengths" not in record or "target_top1_probs" not in record:
        raise ValueError(f"the {record['length']}-token {record['kind']} prompt {record.get('index')} has no "
                         "round_lengths or target_top1_probs; allowed: tau_curve.py runs with --check-exact")
    if record.get("lookup_commits"):
        raise ValueError(f"the {record['length']}-token {record['kind']} prompt {record.get('index')} committed the "
                         "prompt-lookup chain: its rounds are not the draft's alone; allowed: --lookup-tokens 0 runs")
    probs = record["target_top1_probs"]
    aligned = len(probs) if record.get("identical", True) else record["first_divergence"]
    outcomes, start = [], 1  # output position 0 is the prefill's token: no round made it
    for emitted in record["round_lengths"][:-1]:
        for k in range(emitted):
            position = start + k
            if position >= aligned:
                return outcomes
            if k < emitted - 1:
                outcomes.append((probs[position], k + 1, True))
            elif emitted - 1 < depth:
                outcomes.append((probs[position], k + 1, False))
        start += emitted
    return outcomes


def bin_of(certainty: float, edges) -> int:
    return sum(certainty >= edge for edge in edges)


def bin_counts(outcomes, edges) -> list[list[int]]:
    """Per certainty bin: [positions, hits]."""
    counts = [[0, 0] for _ in range(len(edges) + 1)]
    for certainty, _, hit in outcomes:
        cell = counts[bin_of(certainty, edges)]
        cell[0] += 1
        cell[1] += hit
    return counts


def rates(short_counts, long_counts) -> dict:
    """Hit rates of both lengths, and the long one's standardized to the short one's certainty mix."""
    def rate(counts):
        total = sum(n for n, _ in counts)
        return sum(h for _, h in counts) / total if total else None
    total_short = sum(n for n, _ in short_counts)
    standardized = sum((n_short / total_short) * (h / n) for (n_short, _), (n, h) in zip(short_counts, long_counts)
                       if n_short and n) if total_short else None
    # a bin the short prompts fill but the long ones leave empty has no rate to weigh: renormalize over the rest
    covered = sum(n_short for (n_short, _), (n, _) in zip(short_counts, long_counts) if n_short and n)
    if standardized is not None and covered:
        standardized *= total_short / covered
    return {"short": rate(short_counts), "long": rate(long_counts), "long_standardized": standardized}


def add(counts, more):
    return [[a + c, b + d] for (a, b), (c, d) in zip(counts, more)]


def strata(records: list[dict], short: int, long: int, depth: int, edges=DEFAULT_EDGES, kinds=None,
           resamples: int = 2000) -> dict:
    """Per kind (and all kinds pooled): positions and hit rate per certainty bin at both lengths, the rates,
    and 95% paired-bootstrap intervals of long / short for the raw and the standardized rate."""
    by_key = {(r["kind"], r["index"], r["length"]): r for r in records if kinds is None or r["kind"] in kinds}
    pairs, seen = {}, set()
    for (kind, index, length), record in by_key.items():
        other = by_key.get((kind, index, long))
        if length == short and other is not None:
            twice = (kind, record.get("prompt_digest", index), other.get("prompt_digest", index))
            if twice in seen:  # two indices cut the same prompts (a kind with little eval text): count them once
                continue
            seen.add(twice)
            pairs.setdefault(kind, []).append((bin_counts(position_outcomes(record, depth), edges),
                                               bin_counts(position_outcomes(other, depth), edges),
                                               record["target_top1_probs"], other["target_top1_probs"]))
    result = {}
    for kind, kind_pairs in [*pairs.items(), ("all", [p for group in pairs.values() for p in group])]:
        if not kind_pairs:
            continue
        result[kind] = summary(kind_pairs, edges, resamples)
    return result


def summary(pairs, edges, resamples) -> dict:
    empty = [[0, 0] for _ in range(len(edges) + 1)]

    def pooled(chosen):
        short, long = empty, empty
        for s, l, _, _ in chosen:
            short, long = add(short, s), add(long, l)
        return short, long

    short, long = pooled(pairs)
    measured = rates(short, long)
    if not measured["short"] or measured["long"] is None:
        raise ValueError(f"{len(pairs)} prompt pairs give no position the draft was asked about at both lengths "
                         "(only last rounds?); allowed: runs with more new tokens")
    draw = random.Random(0)
    boots = {"raw": [], "standardized": []}
    for _ in range(resamples):
        r = rates(*pooled([draw.choice(pairs) for _ in pairs]))
        if r["short"]:
            boots["raw"].append(r["long"] / r["short"])
            boots["standardized"].append(r["long_standardized"] / r["short"])
    intervals = {}
    for name, values in boots.items():
        values.sort()
        intervals[name] = [values[int(0.025 * len(values))], values[int(0.975 * len(values)) - 1]]

    def mean(values):
        return sum(values) / len(values)

    return {"pairs": len(pairs), "bins": bin_labels(edges), "short_counts": short, "long_counts": long, **measured,
            "ratio_raw": measured["long"] / measured["short"],
            "ratio_standardized": measured["long_standardized"] / measured["short"],
            "interval_raw": intervals["raw"], "interval_standardized": intervals["standardized"],
            "target_certainty_short": mean([mean(s) for _, _, s, _ in pairs]),
            "target_certainty_long": mean([mean(l) for _, _, _, l in pairs])}


def bin_labels(edges) -> list[str]:
    bounds = [0.0, *edges, 1.0]
    return [f"{lo:.2f}-{hi:.2f}" for lo, hi in zip(bounds, bounds[1:])]


def markdown(result: dict, short: int, long: int) -> str:
    lines = []
    for kind, s in result.items():
        lines += [f"**{kind}** ({s['pairs']} prompt pairs; the target's mean certainty {s['target_certainty_short']:.3f} "
                  f"at {short}, {s['target_certainty_long']:.3f} at {long})", "",
                  f"| target p(its token) | positions {short} | positions {long} | hit rate {short} | hit rate {long} |",
                  "|---|---|---|---|---|"]
        for label, (n_s, h_s), (n_l, h_l) in zip(s["bins"], s["short_counts"], s["long_counts"]):
            lines.append(f"| {label} | {n_s} | {n_l} | {h_s / n_s if n_s else 0:.3f} | {h_l / n_l if n_l else 0:.3f} |")
        lines += ["", f"hit rate {short} {s['short']:.3f}, {long} {s['long']:.3f}: {s['ratio_raw']:.3f}x "
                  f"({s['interval_raw'][0]:.3f}-{s['interval_raw'][1]:.3f}); {long} at {short}'s certainty "
                  f"{s['long_standardized']:.3f}: {s['ratio_standardized']:.3f}x ({s['interval_standardized'][0]:.3f}-"
                  f"{s['interval_standardized'][1]:.3f})", ""]
    return "\n".join(lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="tau_curve.json or runs.jsonl files (--check-exact, --lookup-tokens 0)")
    parser.add_argument("--out", required=True, help="folder for certainty_strata.json and .md")
    parser.add_argument("--short", type=int, default=2048)
    parser.add_argument("--long", type=int, default=8000)
    parser.add_argument("--depth", type=int, default=5, help="the tree's depth (default: the shipped tree's 5)")
    parser.add_argument("--kinds", nargs="*", default=None, help="default: every kind in the runs")
    parser.add_argument("--edges", type=float, nargs="+", default=list(DEFAULT_EDGES),
                        help="the certainty bins' inner edges, increasing, inside (0, 1)")
    args = parser.parse_args(argv)
    if sorted(set(args.edges)) != args.edges or not 0 < args.edges[0] <= args.edges[-1] < 1:
        parser.error(f"--edges {args.edges}: allowed increasing values inside (0, 1)")
    records = [record for path in args.runs for record in load_run_records(path)]
    result = strata(records, args.short, args.long, args.depth, args.edges, args.kinds)
    if not result:
        raise SystemExit(f"no (kind, index) measured at both {args.short} and {args.long}; allowed: runs holding both")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"runs": args.runs, "settings": {k: v for k, v in vars(args).items() if k != "runs"}, "strata": result}
    (out / "certainty_strata.json").write_text(json.dumps(report, indent=1))
    table = markdown(result, args.short, args.long)
    (out / "certainty_strata.md").write_text(table + "\n")
    print(table)
    return report


if __name__ == "__main__":
    main()
