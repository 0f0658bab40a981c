"""What a draft-free lookup branch would accept on the prompts a draft was measured on.

    PYTHONPATH=src python benchmarks/lookup_tau.py docs/results/session6_2026-12-01/tau_cpu_stage5.json

Prompt lookup (n-gram copying from the context, as transformers' `prompt_lookup_num_tokens` does)
proposes the tokens that followed the latest earlier occurrence of the last n committed tokens;
the replay runs the library's own search (`hf_longspec.generation.lookup.PromptLookup`, the one
`longspec_lookup_tokens` puts in the tree).
Long prompts repeat themselves (licenses, catalogs, code), so this costs no model at all and may
catch what a small draft misses. Greedy decoding is deterministic, so the target's output stored by
`benchmarks/tau_curve.py` is exactly what a lookup chain would be verified against: replaying it
gives the tau that lookup alone reaches (a chain of `--depth` tokens per round), prompt by prompt,
beside the draft's. The prompts are rebuilt from this machine's eval split, so the JSON must come
from this machine (or one with the same local text): a run that recorded its prompt's digest
(tau_curve.py since the sixteenth session) stops the replay with an error when the prompt rebuilt here
differs. No model runs but the tokenizer.

    python benchmarks/lookup_tau.py RUN.json --depth 32 --ngram-sizes 3 2 1 --ngram-sizes 8 4 3 2 1

`--search-window W` (repeatable) lets the search see only the prompt's last W tokens (and what has been
written since): does a longer context help the chain, or do its older matches mislead it?

`--second-chain K` also replays a second candidate of K tokens (not in the library): the continuation of the
latest earlier match, of the same or a shorter suffix, whose first token differs from the first chain's. A
round then accepts the longer of the two matching prefixes. Does a second guess pay for K more verified nodes?
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from hf_longspec.evaluation import prompt_digest
from hf_longspec.generation.lookup import NGRAM_SIZES, PromptLookup, search_order

sys.path.insert(0, str(Path(__file__).parent))
import tau_curve  # noqa: E402  (a sibling script: the prompts)


def lookup_chain(context: list[int], length: int, ngram_sizes: tuple = NGRAM_SIZES) -> list[int]:
    """The library's chain for this context (its last token the round's root): the `length` tokens
    after the latest earlier match of the longest recurring suffix; [] when no suffix recurs."""
    lookup = PromptLookup(1, len(context), length, "cpu", ngram_sizes)
    lookup.start(torch.tensor([context[:-1]]), [0])
    tokens, valid = lookup.propose(torch.tensor([len(context) - 1]), torch.tensor([context[-1]]))
    return tokens[0][valid[0]].tolist()


def second_chain(context: list[int], first: list[int], length: int, ngram_sizes: tuple = NGRAM_SIZES) -> list[int]:
    """The `length` tokens after the latest earlier match of a recurring suffix (longest suffix first, then
    latest match first) whose first token is not ``first``'s: a second guess where the first may be wrong.
    Repeated with its own period where it reaches the context's end, as the library's chain is."""
    end = len(context)
    for n in ngram_sizes:
        if end <= n:
            continue
        suffix = context[end - n:]
        for position in range(end - n - 1, -1, -1):
            if context[position:position + n] != suffix:
                continue
            start = position + n
            if first and context[start] == first[0]:
                continue
            period = end - start
            return [context[start + step % period] for step in range(length)]
    return []


def accepted_prefix(guess: list[int], output: list[int], committed: int) -> int:
    accepted = 0
    while accepted < len(guess) and committed + accepted < len(output) and guess[accepted] == output[committed + accepted]:
        accepted += 1
    return accepted


def lookup_tau(prompt: list[int], output: list[int], depth: int = 5, ngram_sizes: tuple = NGRAM_SIZES,
               second: int = 0) -> float:
    """Tokens per target forward of lookup-only speculation replayed on a greedy output: the first
    token comes from the prefill; every round then accepts the lookup chain's matching prefix plus
    the target's own next token (tau_curve.py counts the same way). ``second`` K > 0: the longer of the
    chain's and a second chain's (`second_chain`, K tokens) matching prefixes."""
    committed, rounds = 1, 0
    while committed < len(output):
        context = prompt + output[:committed]
        guess = lookup_chain(context, depth, ngram_sizes)
        accepted = accepted_prefix(guess, output, committed)
        if second:
            accepted = max(accepted, accepted_prefix(second_chain(context, guess, second, ngram_sizes), output, committed))
        committed += accepted + 1
        rounds += 1
    return (len(output) - 1) / max(rounds, 1)


def compare(runs: list[dict], prompts: dict, depth: int, ngram_sizes: tuple = NGRAM_SIZES,
            search_window: int | None = None, second: int = 0) -> str:
    """The table of lookup-alone tau beside each run's draft tau. A run that recorded its prompt's
    digest (tau_curve.py since the sixteenth session) is refused when the prompt rebuilt here differs.
    `search_window` W: the search sees only the prompt's last W tokens (None: all of it)."""
    if search_window is not None and (isinstance(search_window, bool) or not isinstance(search_window, int)
                                      or search_window < 1):
        raise ValueError(f"search_window={search_window!r}; allowed: None (the whole prompt) or an int >= 1")
    sizes = search_order(ngram_sizes)  # as the search tries them
    rows, unchecked = [], 0
    for run in runs:
        prompt = prompts.get((run["length"], run["kind"], run["index"]))
        if prompt is None:
            raise ValueError(f"no {run['kind']} prompt {run['index']} at {run['length']} tokens could be rebuilt here "
                             "(too little eval text of that kind on this machine)")
        if "prompt_digest" not in run:
            unchecked += 1
        elif prompt_digest(prompt) != run["prompt_digest"]:
            raise ValueError(
                f"the {run['kind']} prompt {run['index']} at {run['length']} tokens rebuilt here is not the one the run "
                "measured (its prompt_digest differs): this machine's eval text or the prompt builder changed since. "
                "Allowed: a tau_curve.py JSON made from this machine's text with this code.")
        rows.append({**{k: run[k] for k in ("length", "kind", "index")}, "draft": run["tau"],
                     "lookup": lookup_tau(prompt[-search_window:] if search_window else prompt, run["tokens"],
                                          depth, sizes, second)})
    note = f" ({unchecked} recorded no prompt digest: rebuilt unverified)" if unchecked else ""
    window = f", searching the prompt's last {search_window} tokens" if search_window else ""
    window += f", and a second chain of {second}" if second else ""
    lines = [f"lookup chain of {depth} tokens, n-grams {'/'.join(map(str, sizes))}{window}, {len(rows)} prompts{note}",
             "",
             "| kind | draft tau | lookup tau | prompts where lookup beats the draft | best gap (lookup - draft) |",
             "|---|---|---|---|---|"]
    for kind in dict.fromkeys(row["kind"] for row in rows):
        mine = [row for row in rows if row["kind"] == kind]
        best = max(mine, key=lambda row: row["lookup"] - row["draft"])
        lines.append(f"| {kind} | {statistics.mean(r['draft'] for r in mine):.2f} | "
                     f"{statistics.mean(r['lookup'] for r in mine):.2f} | "
                     f"{sum(r['lookup'] > r['draft'] for r in mine)} / {len(mine)} | "
                     f"{best['lookup'] - best['draft']:+.2f} ({best['length']}, prompt {best['index']}) |")
    lines.append(f"| all | {statistics.mean(r['draft'] for r in rows):.2f} | {statistics.mean(r['lookup'] for r in rows):.2f} | "
                 f"{sum(r['lookup'] > r['draft'] for r in rows)} / {len(rows)} | |")
    lines += ["", "| context | kind | prompt | draft tau | lookup tau |", "|---|---|---|---|---|"]
    lines += [f"| {r['length']} | {r['kind']} | {r['index']} | {r['draft']:.2f} | {r['lookup']:.2f} |" for r in rows]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tau_json", help="a benchmarks/tau_curve.py JSON measured on this machine's eval split")
    parser.add_argument("--depth", type=int, default=5, help="tokens in the lookup chain (the default tree's depth)")
    parser.add_argument("--target", default="embedded", help="tokenizer: 'embedded' or a local model folder")
    parser.add_argument("--ngram-sizes", type=int, nargs="+", action="append", default=None, metavar="N",
                        help="suffix lengths the search may match (it tries the longest first; default: the "
                             f"library's {' '.join(map(str, NGRAM_SIZES))}); repeat the option to compare several "
                             "sets; give the JSON before it")
    parser.add_argument("--search-window", type=int, action="append", default=None, metavar="W",
                        help="search only the prompt's last W tokens (repeatable: one table per window; "
                             "default: the whole prompt)")
    parser.add_argument("--second-chain", type=int, action="append", default=None, metavar="K",
                        help="also a second candidate chain of K tokens (repeatable: one table per K; 0: none)")
    args = parser.parse_args(argv)
    if any(k < 0 for k in args.second_chain or []):
        parser.error(f"--second-chain {args.second_chain}: each must be >= 0 (tokens of the second chain)")
    if any(window < 1 for window in args.search_window or []):
        parser.error(f"--search-window {args.search_window}: each must be >= 1 (tokens of the prompt the search sees)")
    result = json.loads(Path(args.tau_json).read_text())
    settings = result["settings"]
    from hf_longspec.embedded import load_tokenizer

    tokenizer = load_tokenizer(args.target)
    # a run joined by tau_curve.py --join keeps its first part's settings: rebuild every kind its runs name
    kinds = list(dict.fromkeys([*settings["kinds"], *(run["kind"] for run in result["runs"])]))
    prompts = replay_prompts(tokenizer, {**settings, "kinds": kinds})
    for sizes in args.ngram_sizes or [NGRAM_SIZES]:
        for window in args.search_window or [None]:
            for second in args.second_chain or [0]:
                print(compare(result["runs"], prompts, args.depth, tuple(sizes), window, second), end="\n\n")
    return 0


def replay_prompts(tokenizer, settings: dict) -> dict:
    """The prompts a tau_curve.py run measured, by (length, kind, index), rebuilt from its settings. A
    run from before `--align` existed (ninth session) has no "align" in its settings: its prompts were
    each cut from their stream's start."""
    built = tau_curve.build_prompts(tokenizer, settings["lengths"], settings["kinds"], settings["prompts"],
                                    settings.get("seed", 0), skipped={}, align=settings.get("align", "start"))
    return {(p["length"], p["kind"], p["index"]): p["input_ids"] for p in built}


if __name__ == "__main__":
    raise SystemExit(main())
