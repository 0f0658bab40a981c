"""Two or more drafts' held-out tau on the same prompts, side by side (tables for docs/training.md).

    python benchmarks/compare_tau.py shipped=A/tau_curve.json candidate=B/tau_curve.json [--lengths 2048 4096 8000]

(a runs.jsonl, the records of a run cut short, stands for its tau_curve.json)

Every file must come from `benchmarks/tau_curve.py` with the same lengths, kinds and prompt count, so
that run (length, kind, index) is the same prompt in each (refused where two runs recorded different
prompt digests); the last draft is compared, prompt by prompt, with the first. Prints markdown: tau per kind and per context length, the 8k / 2k ratio per
kind, acceptance reaching depth 1-5, prompts better / worse / equal (apart, too, on the prompts whose two
outputs are the same tokens and on those whose text differs, as bf16 runs can), and the cells.
"""

from __future__ import annotations

import argparse
import statistics

from hf_longspec.evaluation import load_run_records, paired_difference


def load_runs(path: str, lengths=None) -> dict[tuple, dict]:
    runs = load_run_records(path)  # a tau_curve.json, or a cut run's runs.jsonl
    return {(r["length"], r["kind"], r["index"]): r for r in runs if not lengths or r["length"] in lengths}


def mean_tau(runs) -> float:
    return statistics.mean(r["tau"] for r in runs) if runs else float("nan")


def reach(runs) -> list[float]:
    """Share of rounds whose accepted path reaches depth d, pooled over the prompts' rounds."""
    rounds = sum(r["rounds"] for r in runs)
    depth = len(runs[0]["depth"]["reach"])
    return [sum(r["depth"]["reach"][d] * r["rounds"] for r in runs) / rounds for d in range(depth)]


def same_text_split(base: dict, new: dict, keys) -> list[str]:
    """The paired difference apart on the prompts whose two outputs are the same tokens and on those whose
    text differs. In bf16 a different tree changes the verify forward's shapes, so the target's near-ties can
    flip and a pair then measures two continuations (thirty-fifth session: two chains were +0.35 where the
    text held, -0.50 where it changed). Nothing when a file kept no tokens or every pair wrote the same text."""
    if not all("tokens" in base[k] and "tokens" in new[k] for k in keys):
        return []
    same = [k for k in keys if base[k]["tokens"] == new[k]["tokens"]]
    if len(same) == len(keys):
        return []
    lines = []
    for label, group in (("the same tokens", same), ("other text", [k for k in keys if k not in same])):
        if group:
            split = paired_difference([new[k]["tau"] - base[k]["tau"] for k in group])
            lines.append(f"- {len(group)} prompt{'s' if len(group) > 1 else ''} wrote {label} in both: {split['mean']:+.3f} ± {split['stderr']:.3f} "
                         f"(better on {split['better']}, worse on {split['worse']})")
    return ["", "Where the two outputs differ, a pair measures two continuations:", *lines]


def compare(named: dict[str, dict[tuple, dict]]) -> str:
    names = list(named)
    keys = sorted(set.intersection(*(set(runs) for runs in named.values())))
    if not keys:
        raise SystemExit("the files share no (length, kind, prompt) runs")
    for key in keys:  # runs that named their prompts (tau_curve.py since the sixteenth session) must agree
        digests = {name: runs[key]["prompt_digest"] for name, runs in named.items() if "prompt_digest" in runs[key]}
        if len(set(digests.values())) > 1:
            raise SystemExit(f"the {key[1]} prompt {key[2]} at {key[0]} tokens differs between "
                             f"{', '.join(digests)} (prompt_digest): the runs were measured on other text, so they "
                             "do not pair; allowed: files measured on the same prompts")
    kinds = list(dict.fromkeys(k[1] for k in keys))
    lengths = sorted({k[0] for k in keys})
    pick = {name: {k: runs[k] for k in keys} for name, runs in named.items()}

    def cell(name, length=None, kind=None):
        return [r for k, r in pick[name].items() if (length is None or k[0] == length) and (kind is None or k[1] == kind)]

    lines = [f"{len(keys)} prompts: {', '.join(kinds)} at {', '.join(map(str, lengths))} tokens", "",
             "| | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for kind in kinds:
        lines.append(f"| {kind} | " + " | ".join(f"{mean_tau(cell(n, kind=kind)):.2f}" for n in names) + " |")
    for length in lengths:
        lines.append(f"| {length} | " + " | ".join(f"{mean_tau(cell(n, length)):.2f}" for n in names) + " |")
    lines.append("| all | " + " | ".join(f"**{mean_tau(cell(n)):.2f}**" for n in names) + " |")
    if len(lengths) > 1:
        first, last = lengths[0], lengths[-1]
        for kind in kinds + [None]:
            ratios = [mean_tau(cell(n, last, kind)) / mean_tau(cell(n, first, kind)) for n in names]
            lines.append(f"| {last} / {first}, {kind or 'pooled'} | " + " | ".join(f"{x:.2f}x" for x in ratios) + " |")
    lines.append("| acceptance reaching depth 1-5 | " + " | ".join(
        " / ".join(f"{100 * x:.0f}" for x in reach(cell(n))) + "%" for n in names) + " |")
    base, new = names[0], names[-1]
    paired = paired_difference([pick[new][k]["tau"] - pick[base][k]["tau"] for k in keys])
    lines += ["", f"{new} against {base}: better on {paired['better']}, worse on {paired['worse']}, equal on "
              f"{paired['equal']}; mean paired difference {paired['mean']:+.3f} ± {paired['stderr']:.3f} (s.e.)",
              *same_text_split(pick[base], pick[new], keys), "",
              f"Per cell, {new} ({base} in brackets):", "",
              "| context | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for length in lengths:
        lines.append(f"| {length} | " + " | ".join(
            f"{mean_tau(cell(new, length, kind)):.2f} ({mean_tau(cell(base, length, kind)):.2f})" for kind in kinds) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", help="NAME=tau_curve.json, the reference first")
    parser.add_argument("--lengths", type=int, nargs="*", default=None, help="only these context lengths")
    args = parser.parse_args(argv)
    named = {}
    for item in args.files:
        name, sep, path = item.partition("=")
        if not sep:
            raise SystemExit(f"{item!r}: give NAME=PATH")
        named[name] = load_runs(path, args.lengths)
    print(compare(named))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
