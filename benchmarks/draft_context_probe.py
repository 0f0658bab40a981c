"""Why does the draft lose prose tau at 8k? Teacher-forced agreement with the target, context by context.

    PYTHONPATH=src python benchmarks/draft_context_probe.py --out DIR [--prompts 6] [--kinds prose code] \
        [--queries 256 | --continuation N [--continue-from long|short]] [--shifts 1 2 3] [--recent 2048 [R ...]]

For suffix-aligned eval-split prompts (the same text ends every length, as `tau_curve.py --align end`
builds them) the last `--queries` positions of each prompt are scored (with `--continuation N`, the
target's own N greedy tokens after the long prompt, appended to both): does the draft's top-1 (and top-4,
the tree's first level) hold the target's greedy next token? The draft reads the target's cache up to
i - shift, as a tree node `shift - 1` deep does. Three readings of the same text:
- `2048`: the 2048-token suffix, the target run on it alone;
- `8000`: the whole prompt;
- `8000, recent R`: the 8000-token target cache, of which the draft's cross-attention reads only the
  first `num_anchor_tokens` entries and the last R before each query (one reading per R given: a sweep
  of the `cross_attention_window` a draft would decode with).
All three score the same tokens, so a difference between them is the context's doing, not the text's
(tau at 2k and 8k, even on aligned prompts, is measured on two different continuations: the target
writes other tokens after 8000 than after 2048). If `8000` loses to `2048` and `8000, recent 2048`
recovers it, the draft loses by reading more keys (attention spread over distractors); if it does not
recover, by reading the target's 8k cache itself. `--continue-from short` scores the 2k continuation
instead: the other text, at both lengths. The target's own greedy tokens at 2048 and 8000 are compared
too (how often the label itself changes).
Writes DIR/draft_context_probe.json and prints a table; each prompt's result also goes to DIR/results.jsonl
as soon as it is probed (a run cut short keeps those). Runs on the target's device (the GPU when there is one). Runs the draft's real modules; the unrestricted
reading is checked against the draft's own training forward before anything is measured.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import DynamicCache

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tau_curve import build_prompts  # noqa: E402  (the same prompts as the tau curve)

from hf_longspec.demo import load_draft_for  # noqa: E402
from hf_longspec.evaluation import paired_difference, prompt_digest  # noqa: E402
from hf_longspec.embedded import load_embedded_target  # noqa: E402
from hf_longspec.modeling_longspec import attend  # noqa: E402
from hf_longspec.target_support import cache_argument_name, target_layers_kv  # noqa: E402


@torch.no_grad()
def target_pass_cache(target, ids: torch.Tensor):
    """The target's logits over `ids` (1, S) and the cache its forward filled (every layer's K/V)."""
    cache = DynamicCache(config=target.config)
    logits = target(input_ids=ids, use_cache=True, **{cache_argument_name(target): cache}).logits
    return logits[0], cache


def target_pass(target, ids: torch.Tensor, layers):
    """The target's logits and the K/V of `layers` (a draft's `target_layers`) over `ids` (1, S), side by
    side on the head axis as the draft's training forward reads them, so a draft that reads several
    target layers (`extra_target_layer_indices`) is probed on all of them."""
    logits, cache = target_pass_cache(target, ids)
    return logits, *target_layers_kv(cache, layers)


def cross_attention_mask(seq: int, queries: int, shift: int, recent: int | None, anchors: int) -> torch.Tensor:
    """(Q, S) bool: query i (one of the last `queries` positions) reads entries j <= i - shift; with
    `recent`, only those j < anchors or j > i - shift - recent."""
    query = torch.arange(seq - queries, seq)[:, None]
    key = torch.arange(seq)[None, :]
    visible = key <= query - shift
    if recent is not None:
        visible &= (key < anchors) | (key > query - shift - recent)
    return visible


@torch.no_grad()
def draft_logits(draft, ids: torch.Tensor, keys, values, queries: int, shift: int, recent: int | None) -> torch.Tensor:
    """The draft's logits (Q, V) at the last `queries` positions of `ids`, reading the target cache
    through `cross_attention_mask`. Self-attention is windowed, so only the last queries + window
    tokens are run through it (positions kept)."""
    seq = ids.shape[1]
    start = max(0, seq - queries - draft.config.sliding_window)
    positions = torch.arange(start, seq, device=ids.device)[None]
    hidden = draft._embed(ids[:, start:])
    cos, sin = draft.rotary_emb(positions, hidden.dtype)
    hidden = hidden + draft.self_attn.forward_sequence(draft.input_layernorm(hidden), cos, sin, positions)
    hidden, cos, sin = hidden[:, -queries:], cos[:, -queries:], sin[:, -queries:]
    attention = draft.cross_attn
    mask = cross_attention_mask(seq, queries, shift, recent, draft.config.num_anchor_tokens).to(ids.device)
    query = attention.project_q(draft.cross_attn_layernorm(hidden), cos, sin)
    query = attention.scale_by_length(query, mask.sum(-1)[None, None, :, None])  # a no-op unless the draft learned one
    read = attend(query, keys, values, mask=mask[None, None], scale=attention.scaling)
    read = attention.output(read)
    if attention.entry_proj is not None:  # the direct read of entry i - shift (configuration_longspec.py)
        index = torch.arange(seq - queries, seq, device=ids.device)[None] - shift
        entry_cos, entry_sin = draft.rotary_emb(index, hidden.dtype)
        read = read + attention.entry_output(attention.newest_entry(keys, values, index, entry_cos, entry_sin))
    hidden = hidden + read
    hidden = hidden + draft.mlp(draft.post_attention_layernorm(hidden))
    return draft._logits(hidden)[0]


def agreement(draft_out: torch.Tensor, target_out: torch.Tensor) -> dict:
    """Shares of positions whose target greedy token is the draft's top-1 / in its top-4."""
    wanted = target_out.argmax(-1)
    top4 = draft_out.topk(4, dim=-1).indices
    return {"top1": float((top4[:, 0] == wanted).float().mean()), "top4": float((top4 == wanted[:, None]).any(-1).float().mean())}


def check_against_training_forward(draft, target, ids: torch.Tensor, shift: int) -> None:
    """The unrestricted reading must be the draft's own training forward (same modules, same math)."""
    _, keys, values = target_pass(target, ids, draft.target_layers)
    mine = draft_logits(draft, ids, keys, values, 64, shift, None)
    with torch.no_grad():
        theirs = draft(ids, keys, values, noise_shift=shift).logits[0, -64:]
    if not torch.allclose(mine, theirs, atol=1e-3, rtol=1e-3):
        raise AssertionError(f"probe reading differs from the training forward: {(mine - theirs).abs().max():.2e}")


@torch.no_grad()
def with_continuation(target, long_prompt: dict, short_prompt: dict, tokens: int, source: str = "long") -> tuple[dict, dict]:
    """Both prompts extended by the target's greedy continuation of the `source` one ("long": the text a
    tree drafts at 8k, read also with only 2048 tokens before it; "short": the text it drafts at 2k)."""
    ids = torch.tensor([(long_prompt if source == "long" else short_prompt)["input_ids"]], device=target.device)
    new = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens, min_new_tokens=tokens,
                          do_sample=False)[0, ids.shape[1]:].tolist()
    return ({**long_prompt, "input_ids": long_prompt["input_ids"] + new},
            {**short_prompt, "input_ids": short_prompt["input_ids"] + new})


def probe(target, draft, long_prompt: dict, short_prompt: dict, args) -> dict:
    layers = draft.target_layers
    result = {"kind": long_prompt["kind"], "index": long_prompt["index"], "source": long_prompt.get("source"),
              "prompt_digests": [prompt_digest(long_prompt["input_ids"]), prompt_digest(short_prompt["input_ids"])]}
    if args.continuation:
        long_prompt, short_prompt = with_continuation(target, long_prompt, short_prompt, args.continuation,
                                                      args.continue_from)
    runs = {}
    for name, prompt in (("short", short_prompt), ("long", long_prompt)):
        ids = torch.tensor([prompt["input_ids"]], device=target.device)
        logits, keys, values = target_pass(target, ids, layers)
        runs[name] = (ids, logits[-args.queries:], keys, values)
    result["target_same_label"] = float((runs["short"][1].argmax(-1) == runs["long"][1].argmax(-1)).float().mean())
    result["target_top1_prob"] = {name: float(run[1].softmax(-1).amax(-1).mean()) for name, run in runs.items()}
    for shift in args.shifts:
        readings = {f"{short_prompt['length']}": ("short", None), f"{long_prompt['length']}": ("long", None),
                    **{f"{long_prompt['length']}, recent {r}": ("long", r) for r in args.recent}}
        for label, (which, recent) in readings.items():
            ids, target_out, keys, values = runs[which]
            out = draft_logits(draft, ids, keys, values, args.queries, shift, recent)
            result.setdefault(f"shift {shift}", {})[label] = agreement(out, target_out)
    return result


def table(results: list[dict], shifts, labels) -> str:
    lines = ["| kind | shift | " + " | ".join(f"{label}: top-1 / top-4" for label in labels) + " |",
             "|---|---|" + "---|" * len(labels)]
    for kind in dict.fromkeys(r["kind"] for r in results):
        mine = [r for r in results if r["kind"] == kind]
        for shift in shifts:
            cells = []
            for label in labels:
                top1 = sum(r[f"shift {shift}"][label]["top1"] for r in mine) / len(mine)
                top4 = sum(r[f"shift {shift}"][label]["top4"] for r in mine) / len(mine)
                cells.append(f"{top1:.3f} / {top4:.3f}")
            lines.append(f"| {kind} | {shift} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def read_results(path: str) -> list[dict]:
    """Each prompt's shift-1 readings from a results.jsonl (whole records) or from a run's log, whose lines
    `KIND-INDEX: {shift 1 readings} (N s)` are what a run cut before its results.jsonl existed left."""
    results = []
    for line in Path(path).read_text().splitlines():
        if line.startswith("{"):
            results.append(json.loads(line))
        elif (match := re.fullmatch(r"(\w+)-(\d+): (\{.*\}) \(\d+ s\)", line.strip())):
            results.append({"kind": match.group(1), "index": int(match.group(2)), "shift 1": json.loads(match.group(3))})
    return results


def distinct_prompts(results: list[dict]) -> list[dict]:
    """Each pair of prompts once: a kind with little eval text can give two indices the same prompts, which
    would count one text twice in a mean and its error (records without digests, from a log, count each)."""
    seen, kept = set(), []
    for result in results:
        key = (result["kind"], *result["prompt_digests"]) if "prompt_digests" in result else id(result)
        if key not in seen:
            seen.add(key)
            kept.append(result)
    return kept


def reading_difference(records: list[dict], after: str, before: str, measure: str) -> dict:
    """`paired_difference` of two readings' `measure` over the prompts."""
    return paired_difference([m[after][measure] - m[before][measure] for m in records])


def paired_summary(results: list[dict], shift: int = 1) -> dict:
    """Per kind and measure (top1, top4): the mean of each reading, its mean paired difference from the
    one before it, and each restricted reading's from the whole long cache (the window's own gain)."""
    summary = {}
    results = distinct_prompts(results)
    for kind in dict.fromkeys(r["kind"] for r in results):
        mine = [r[f"shift {shift}"] for r in results if r["kind"] == kind]
        labels = list(mine[0])
        for measure in ("top1", "top4"):
            cell = {"prompts": len(mine), "mean": {label: statistics.fmean(m[label][measure] for m in mine) for label in labels}}
            for before, after in zip(labels, labels[1:]):
                cell[f"{after} - {before}"] = reading_difference(mine, after, before, measure)
            for after in labels[3:]:  # a sweep's later windows, against the whole long cache too
                cell[f"{after} - {labels[1]}"] = reading_difference(mine, after, labels[1], measure)
            summary.setdefault(kind, {})[measure] = cell
    return summary


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kinds", nargs="+", default=["prose", "code"])
    parser.add_argument("--prompts", type=int, default=6, help="prompts per kind")
    parser.add_argument("--lengths", type=int, nargs=2, default=[2048, 8000], metavar=("SHORT", "LONG"))
    parser.add_argument("--queries", type=int, default=256, help="positions scored at the end of each prompt")
    parser.add_argument("--shifts", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--recent", type=int, nargs="+", default=[2048],
                        help="entries a restricted reading keeps before each query (one reading per value)")
    parser.add_argument("--continuation", type=int, default=0, metavar="N",
                        help="append the target's N greedy tokens after the long prompt to both and score those "
                             "(N replaces --queries): the text speculation drafts, not the prompt's own")
    parser.add_argument("--continue-from", choices=("long", "short"), default="long",
                        help="whose continuation --continuation appends: the long prompt's (default) or the short one's")
    parser.add_argument("--draft", default="embedded", help="'embedded' (the shipped draft) or a draft folder")
    parser.add_argument("--summarize", default=None, metavar="FILE",
                        help="load no model: the paired summary of a results.jsonl or a run's log, into --out")
    args = parser.parse_args(argv)
    if args.summarize:
        summary = paired_summary(read_results(args.summarize))
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "draft_context_probe_summary.json").write_text(json.dumps(summary, indent=1))
        print(json.dumps(summary, indent=1))
        return summary
    short, long = args.lengths
    if args.continuation:
        args.queries = args.continuation
    if not 0 < args.queries < short or any(r < 1 for r in args.recent) or any(s < 1 for s in args.shifts):
        parser.error(f"--queries must be in [1, {short}), --recent and --shifts >= 1")

    torch.manual_seed(0)
    target, tokenizer = load_embedded_target(dtype=torch.float32)
    draft, draft_source = load_draft_for(target, args.draft)
    prompts = build_prompts(tokenizer, [short, long], args.kinds, args.prompts, align="end")
    check_against_training_forward(draft, target, torch.tensor([prompts[0]["input_ids"][-512:]], device=target.device), shift=2)

    started = time.perf_counter()
    results = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "results.jsonl"  # one line per probed prompt, as it is probed: what a run cut by a time limit keeps
    partial.write_text("")
    for kind in args.kinds:
        for index in range(args.prompts):
            pair = {p["length"]: p for p in prompts if p["kind"] == kind and p["index"] == index}
            if len(pair) < 2:
                continue
            results.append(probe(target, draft, pair[long], pair[short], args))
            with partial.open("a") as stream:
                stream.write(json.dumps(results[-1]) + "\n")
            print(f"{kind}-{index}: {json.dumps(results[-1]['shift 1'])} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    labels = [f"{short}", f"{long}", *(f"{long}, recent {r}" for r in args.recent)]
    distinct = distinct_prompts(results)  # the means count each text once; "results" keeps every index
    report = {"settings": vars(args), "draft": draft_source, "results": results, "seconds": time.perf_counter() - started,
              "repeated_prompts": len(results) - len(distinct),
              "table": table(distinct, args.shifts, labels), "paired": paired_summary(distinct)}
    for kind in dict.fromkeys(r["kind"] for r in distinct):
        mine = [r for r in distinct if r["kind"] == kind]
        report.setdefault("target", {})[kind] = {
            "same_label_2k_8k": sum(r["target_same_label"] for r in mine) / len(mine),
            "top1_prob": {n: sum(r["target_top1_prob"][n] for r in mine) / len(mine) for n in ("short", "long")}}
    (out / "draft_context_probe.json").write_text(json.dumps(report, indent=1))
    print(report["table"])
    print(json.dumps(report["target"], indent=1))
    return report


if __name__ == "__main__":
    main()
