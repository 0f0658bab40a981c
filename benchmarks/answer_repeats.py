"""How much of the target's own writing in chat records repeats itself? (issue 12, fourteenth session)

    python benchmarks/answer_repeats.py .carry/chat14/long_*.jsonl.gz --out docs/results/session14_2026-12-02/answer_repeats.json

Greedy decoding of a small target loops, and a loop is easy to predict, so records whose answers are
mostly loops teach a draft what the prompt-lookup chain already copies. Per file, and per task kind
(bare-document continuations against instructions): answers at the length limit, the share of each
answer's `--window`-token windows that repeat an earlier window of the same answer, the answers where
that share passes `--looping`, and where the first repeat starts (median, quartiles, share before 96
tokens, the length the ablation's tau is measured on).
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
from pathlib import Path


def first_repeat_and_share(answer: list[int], window: int) -> tuple[int, float]:
    """(start of the first window that repeats an earlier one, or len(answer) when none does; the share
    of windows that repeat an earlier one)."""
    seen, first, repeated = set(), len(answer), 0
    count = max(len(answer) - window + 1, 0)
    for start in range(count):
        key = tuple(answer[start:start + window])
        if key in seen:
            repeated += 1
            first = min(first, start)
        seen.add(key)
    return first, repeated / count if count else 0.0


def summarize(records: list[dict], window: int, looping: float, eval_tokens: int) -> dict:
    firsts, shares = [], []
    for record in records:
        first, share = first_repeat_and_share(record["input_ids"][record["prompt_tokens"]:], window)
        firsts.append(first)
        shares.append(share)
    limit = max((r["answer_tokens"] for r in records), default=0)
    ordered = sorted(firsts)
    return {
        "records": len(records),
        "answer_tokens_max": limit,
        "answers_at_the_longest": sum(r["answer_tokens"] == limit for r in records),
        "repeating_window_share": statistics.mean(shares) if shares else None,
        f"answers_over_{looping:g}_repeated": sum(share > looping for share in shares),
        "first_repeat_median": statistics.median(firsts) if firsts else None,
        "first_repeat_quartiles": [ordered[len(ordered) // 4], ordered[3 * len(ordered) // 4]] if ordered else None,
        f"repeating_before_{eval_tokens}": sum(first < eval_tokens for first in firsts) / len(firsts) if firsts else None,
    }


def read_records(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("records", nargs="+", help="jsonl (or .jsonl.gz) files of make_chat_data.py")
    parser.add_argument("--window", type=int, default=16)
    parser.add_argument("--looping", type=float, default=0.3, help="share of repeating windows that counts as a loop")
    parser.add_argument("--eval-tokens", type=int, default=96)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    report = {"settings": {k: v for k, v in vars(args).items() if k != "out"}, "files": {}, "tasks": {}}
    everything = []
    for name in args.records:
        records = read_records(Path(name))
        everything += records
        report["files"][Path(name).name] = summarize(records, args.window, args.looping, args.eval_tokens)
    for kind, keep in (("continue", lambda r: r["task"] == "continue"), ("instructions", lambda r: r["task"] != "continue"),
                       ("all", lambda r: True)):
        report["tasks"][kind] = summarize([r for r in everything if keep(r)], args.window, args.looping,
                                          args.eval_tokens)
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
