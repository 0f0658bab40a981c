"""How independent are tau_curve's prompts? Shared text between prompts of one kind.

    PYTHONPATH=src python benchmarks/prompt_overlap.py --out DIR [--length 8000] [--window 2048] \
        [--kinds code prose chat] [--prompts 24] [--threshold 0.2]

tau_curve's prompts of one kind come from one eval-split stream cut at seed-dependent points. Where that
stream is small (prose: package metadata and license texts, which many packages ship near-verbatim), two
prompts may end in the same text, and their tau is then one measurement counted twice. For every prompt
this builds the same `--align end` prompts as tau_curve (same machine, same seed) and reports the share of
its last `--window` tokens' 16-grams (every 8th position) found anywhere in another prompt of its kind.
Prompts are grouped greedily: a prompt joins the first earlier group one of whose members shares more
than `--threshold` of its window. Writes DIR/prompt_overlap.json (per prompt: index, source, digest of
the `--window` suffix, the largest overlap and with which index, its group) and, for a corpus kind, the
files and bytes of its eval split.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hf_longspec.corpus import KINDS, documents
from hf_longspec.embedded import load_tokenizer
from hf_longspec.evaluation import prompt_digest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tau_curve import build_prompts  # noqa: E402  (the very prompts tau_curve runs)

GRAM, STRIDE = 16, 8


def grams(ids: list[int], start: int = 0, stride: int = STRIDE) -> set[tuple[int, ...]]:
    """The 16-grams from `start` on, every `stride`-th (a prompt's whole text: stride 1, so a window's
    strided grams are found at any alignment)."""
    return {tuple(ids[i : i + GRAM]) for i in range(start, len(ids) - GRAM + 1, stride)}


def overlap_table(prompts: list[dict], window: int, threshold: float) -> list[dict]:
    """Per prompt of one kind: its window's largest shared share with another prompt, and its group."""
    tails = [grams(p["input_ids"], len(p["input_ids"]) - window) for p in prompts]
    whole = [grams(p["input_ids"], stride=1) for p in prompts]
    shares = [[len(tails[i] & whole[j]) / len(tails[i]) if i != j else 0.0 for j in range(len(prompts))]
              for i in range(len(prompts))]
    groups: list[list[int]] = []
    rows = []
    for i, prompt in enumerate(prompts):
        best = max(range(len(prompts)), key=lambda j: shares[i][j])
        home = next((g for g, members in enumerate(groups)
                     if any(max(shares[i][m], shares[m][i]) > threshold for m in members)), None)
        if home is None:
            groups.append([i])
            home = len(groups) - 1
        else:
            groups[home].append(i)
        rows.append({"index": prompt["index"], "source": prompt["source"],
                     "window_digest": prompt_digest(prompt["input_ids"][-window:]),
                     "largest_share": round(shares[i][best], 4), "with_index": prompts[best]["index"],
                     "group": home})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--length", type=int, default=8000, help="the longest prompt (tau_curve's longest length)")
    parser.add_argument("--window", type=int, default=2048, help="the tail compared: tau_curve's shortest length of interest")
    parser.add_argument("--kinds", nargs="+", default=["code", "prose", "chat"])
    parser.add_argument("--prompts", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threshold", type=float, default=0.2)
    args = parser.parse_args(argv)
    if not 0 < args.window <= args.length:
        parser.error(f"--window {args.window}: allowed 1..--length ({args.length})")
    tokenizer = load_tokenizer()
    skipped: dict = {}
    prompts = build_prompts(tokenizer, [args.length], args.kinds, args.prompts, seed=args.seed, skipped=skipped)
    result = {"settings": vars(args), "skipped": skipped, "kinds": {}}
    for kind in args.kinds:
        mine = [p for p in prompts if p["kind"] == kind]
        if not mine:
            continue
        rows = overlap_table(mine, args.window, args.threshold)
        groups = len({row["group"] for row in rows})
        result["kinds"][kind] = {"prompts": len(rows), "groups": groups, "rows": rows}
        if kind in KINDS:  # how much eval text the kind's prompts are cut from
            files = documents(kind, "eval")
            result["kinds"][kind]["eval_files"] = len(files)
            result["kinds"][kind]["eval_bytes"] = sum(d.path.stat().st_size for d in files)
        print(f"{kind}: {len(rows)} prompts, {groups} groups sharing <= {args.threshold:.0%} of a {args.window}-token "
              f"window; largest shares {sorted((r['largest_share'] for r in rows), reverse=True)[:6]}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "prompt_overlap.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
