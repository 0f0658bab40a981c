"""tau against context length, per prompt kind: does the draft hold its acceptance up to 8k?

    PYTHONPATH=src python benchmarks/tau_curve.py --out DIR [--lengths 1024 2048 4096 8000] \
        [--kinds code prose chat] [--prompts 2] [--new-tokens 64] [--check-exact [LENGTH ...]] \
        [--device cuda --dtype bfloat16] [--draft embedded|FOLDER] [--align end|start] [--text-file NAME=PATH]

tau = tokens emitted per speculation round (`draft.last_stats.tau`), greedy, default tree, one
`target.generate(ids, assistant_model=draft)` call per prompt on the embedded SmolLM2 target.
Prompts come from the corpus eval split only (never trained on), at exactly each length:
- code, prose (and any other corpus kind): bench.workloads, the cut lands inside a document;
- chat: an eval-split document (code or docs, alternating by prompt index) inside a user turn that
  asks for a summary / explanation (training.chat_data's task texts), rendered with the target's
  chat template; the document is cut so the rendered prompt has exactly the length asked for.
`--align` says how the lengths of one (kind, index) relate:
- `end` (the default): every length ends where the longest prompt ends; a shorter prompt is the
  longest one's last tokens (a chat prompt keeps its template and cuts its document from the front).
  All lengths then continue the same text, so a change of tau with length is the context's doing.
  `--suffix-of L` cuts them from L-token prompts instead, so that a run of the short lengths alone pairs
  with a run that had L (compare_tau.py refuses runs whose prompts differ).
- `start`: each length is cut from the start of the same stream (the form before the ninth session),
  so each length ends in, and continues, a different document.
Acceptance per depth comes from the histogram of tokens per round: reach[d] = share of rounds whose
accepted path is at least d draft tokens deep, and accept[d] = reach[d] / reach[d - 1].
`--check-exact` also runs plain greedy generate and records whether the tokens are identical and the
target's probability of its greedy token at each step (bare: every length; with lengths: only those);
every record keeps its rounds' lengths in order, so benchmarks/certainty_strata.py can set the draft's
hits beside the target's certainty. Writes DIR/tau_curve.json, .md and .png, and each prompt's
record to DIR/runs.jsonl as soon as it is measured (a run cut short keeps those).
`--text-file NAME=PATH` adds a kind NAME cut from one local text file (text no corpus source reads,
e.g. an essay: the issue's "plain English essays" have no corpus kind): prompt i of it ends at its own
point, spread evenly from the file's end back to where the longest prompt still fits.
A prompt that two indices cut identically (a kind with little eval text) counts once per cell ("repeated"
in the table). The goals: the mean over code, prose and chat (the issue's kinds; other kinds beside it), and
each kind's 8k / 2k ratio with a 95% paired-bootstrap interval over its prompts.
`--join A.json B.json ...` loads no model: it joins the prompts of earlier runs of one draft with one
setting (a 1k run beside a 2k-8k run) into one DIR/tau_curve.json, .md and .png. A prompt that two runs
share must have given the same tokens in both (suffix-aligned runs repeat their longest prompts).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.workloads import build_workloads
from hf_longspec.corpus import KINDS, long_prompt_ids
from hf_longspec.demo import load_draft_for
from hf_longspec.embedded import load_embedded_target
from hf_longspec.evaluation import own_round, prompt_digest, suffix_ids
from hf_longspec.generation.lookup import MAX_LOOKUP_CHAINS, MAX_LOOKUP_TOKENS, is_lookup_length
from hf_longspec.publishing.weights_digest import model_weights_digest
from hf_longspec.training.chat_data import PROSE_TASKS, TASKS_BY_SOURCE

CHAT_SOURCES = ("code", "docs")  # chat prompt i wraps a document of CHAT_SOURCES[i % 2]
_MARKER = "\uE000DOCUMENT\uE000"  # a private-use placeholder, split out of the rendered template
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def chat_parts(tokenizer, length: int, index: int, seed: int = 0) -> tuple[str, list[int], list[int], list[int]]:
    """(description, head, document, tail): a user turn over an eval-split document, `length` tokens in all.

    The template is rendered around a placeholder; its two halves are tokenized apart and the
    document's tokens fill exactly the room left between them."""
    source = CHAT_SOURCES[index % len(CHAT_SOURCES)]
    tasks = TASKS_BY_SOURCE.get(source, PROSE_TASKS)
    task, template = tasks[(index // len(CHAT_SOURCES)) % len(tasks)]
    messages = [{"role": "user", "content": template.format(document=_MARKER)}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    head, tail = text.split(_MARKER)
    head_ids = tokenizer.encode(head, add_special_tokens=False)
    tail_ids = tokenizer.encode(tail, add_special_tokens=False)
    room = length - len(head_ids) - len(tail_ids)
    if room < 1:
        raise ValueError(f"a chat prompt needs more than {len(head_ids) + len(tail_ids)} tokens, got {length}")
    document = long_prompt_ids(tokenizer, room, kind=source, split="eval", seed=seed + index)
    return f"{task}:{source}", head_ids, document, tail_ids


def suffix_prompt(prompt: dict, length: int) -> dict:
    """`prompt` cut to `length` tokens from the front, so that it still ends where `prompt` ends.

    A chat prompt keeps its template (head and tail) whole and loses the front of its document."""
    try:
        ids = suffix_ids(prompt["input_ids"], length, prompt.get("head", 0), prompt.get("tail", 0))
    except ValueError as error:
        raise ValueError(f"{prompt['kind']} prompt: {error}") from None
    return {**prompt, "length": length, "input_ids": ids}


def file_prompts(tokenizer, name: str, path: str, lengths, prompts: int, align: str,
                 suffix_of: int | None = None) -> list[dict]:
    """Prompts of kind `name` from one text file. With align "end" each index i has one prompt of the
    longest length (the caller cuts the others from it); its ending steps back from the file's end, evenly,
    to the earliest point the longest prompt fits. With "start" each length starts at the same points."""
    ids = tokenizer.encode(Path(path).read_text(encoding="utf-8", errors="replace"), add_special_tokens=False)
    longest = max(*lengths, suffix_of or 0)
    if len(ids) < longest:
        raise ValueError(f"--text-file {name}={path} has {len(ids)} tokens; allowed: a file of at least the longest "
                         f"length, {longest}")
    room = len(ids) - longest  # where the longest prompt may start: 0..room
    starts = [room - round(index * room / max(prompts - 1, 1)) for index in range(prompts)]
    built = [longest] if align == "end" else list(lengths)
    return [{"length": length, "kind": name, "index": index, "source": Path(path).name,
             "input_ids": ids[start : start + length]}  # "end" builds the longest only; the caller cuts it
            for length in built for index, start in enumerate(starts)]


def check_suffix_of(suffix_of: int | None, align: str, lengths) -> None:
    """--suffix-of L: cut from L-token prompts, so only with align "end" and L at least the longest length."""
    if suffix_of is not None and (align != "end" or suffix_of < max(lengths)):
        raise ValueError(f"suffix_of={suffix_of} with align={align!r} and lengths {sorted(lengths)}; allowed: align "
                         "'end' and a length at least the longest one asked for")


def build_prompts(tokenizer, lengths, kinds, prompts: int, seed: int = 0, skipped: dict | None = None,
                  align: str = "end", text_files: dict | None = None, suffix_of: int | None = None,
                  first_index: int = 0) -> list[dict]:
    """Every (length, kind, index) prompt, ordered by length then kind: the corpus kinds from the
    benchmark workloads, chat from `chat_parts`. With ``skipped`` (a dict), a corpus kind this machine
    has too little eval text of is left out and its reason recorded there (a GPU machine without
    translated man pages has ~1.4k tokens of multilingual text), instead of failing every kind.
    ``align="end"``: the longest prompt of each (kind, index) is built and the others are its
    suffixes (`suffix_prompt`); ``"start"``: each length is built on its own. ``text_files`` (NAME ->
    path): kinds cut from local files (`file_prompts`), run after ``kinds``. ``suffix_of`` (align "end"): the
    longest prompt built is this long even when no length asks for it, so a run of the shorter lengths alone
    measures the same text as a run that has this length too (compare_tau.py pairs them). ``first_index``:
    the corpus kinds' and chat's prompt indices start there, so a run can extend an earlier one (--join)."""
    text_files = text_files or {}
    if align not in ("end", "start"):
        raise ValueError(f"align must be 'end' or 'start', got {align!r}")
    check_suffix_of(suffix_of, align, lengths)
    built = [max(*lengths, suffix_of or 0)] if align == "end" else list(lengths)
    found = []
    for kind in [k for k in kinds if k != "chat"]:
        try:
            workloads = build_workloads(tokenizer, built, [kind], prompts, seed=seed, first_index=first_index)
        except ValueError as error:
            if skipped is None:
                raise
            skipped[kind] = str(error)
            print(f"skipping {kind}: {error}", flush=True)
            continue
        found += [{"length": w.length, "kind": w.kind, "index": w.index, "source": w.source,
                   "input_ids": list(w.input_ids)} for w in workloads]
    if "chat" in kinds:
        for length in built:
            for index in range(first_index, first_index + prompts):
                source, head, document, tail = chat_parts(tokenizer, length, index, seed)
                found.append({"length": length, "kind": "chat", "index": index, "source": source,
                              "input_ids": head + document + tail, "head": len(head), "tail": len(tail)})
    for name, path in text_files.items():
        found += file_prompts(tokenizer, name, path, lengths, prompts, align, suffix_of)
    if align == "end":
        found = [suffix_prompt(prompt, length) for prompt in found for length in lengths]
    found = [{k: v for k, v in prompt.items() if k not in ("head", "tail")} for prompt in found]  # cut, not run
    order = [*kinds, *text_files]
    found.sort(key=lambda p: (p["length"], order.index(p["kind"]), p["index"]))
    for prompt in found:
        assert len(prompt["input_ids"]) == prompt["length"], (prompt["kind"], prompt["length"], len(prompt["input_ids"]))
    return found


def depth_acceptance(histogram: dict, depth: int) -> dict:
    """reach[d]: share of rounds accepting >= d draft tokens; accept[d] = reach[d] / reach[d-1].

    Histogram keys are tokens per round (accepted draft tokens + the bonus token)."""
    rounds = sum(histogram.values())
    reach = [sum(n for emitted, n in histogram.items() if int(emitted) - 1 >= d) / rounds if rounds else 0.0
             for d in range(depth + 1)]
    accept = [reach[d] / reach[d - 1] if reach[d - 1] else None for d in range(1, depth + 1)]
    return {"reach": reach[1:], "accept": accept}


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_prompt(target, draft, prompt: dict, args, check_exact: bool, depth: int) -> dict:
    device = target.get_input_embeddings().weight.device
    ids = torch.tensor([prompt["input_ids"]], device=device)
    common = {"attention_mask": torch.ones_like(ids), "max_new_tokens": args.new_tokens, "do_sample": False,
              "pad_token_id": args.pad_token_id}
    extra = own_round(draft)  # on every device: a config's CPU round is a speed choice, not the draft's
    if args.tree_widths:
        extra["longspec_tree_widths"] = args.tree_widths
    if args.lookup_tokens is not None:
        extra["longspec_lookup_tokens"] = args.lookup_tokens
    if args.lookup_chains is not None:
        extra["longspec_lookup_chains"] = args.lookup_chains
    if args.cross_attention_window is not None:  # per call: 0 (every entry) is allowed there, not in a config
        extra["longspec_cross_attention_window"] = args.cross_attention_window
    if args.rerank_leaves is not None:
        extra["longspec_rerank_leaves"] = args.rerank_leaves
    if args.no_compile:  # tau does not depend on it; captured graphs alone start in a second, not a minute
        extra["longspec_compile"] = False
    _sync(device)
    start = time.perf_counter()
    out = target.generate(ids, assistant_model=draft, **common, **extra)
    _sync(device)
    stats = draft.last_stats.as_dict()
    new = out[0, ids.shape[1]:].tolist()
    record = {k: prompt[k] for k in ("length", "kind", "index", "source")}
    record["prompt_digest"] = prompt_digest(prompt["input_ids"])
    record.update(tau=stats["tau"], rounds=stats["rounds"], new_tokens=len(new), seconds=time.perf_counter() - start,
                  histogram=stats["accepted_length_histogram"], depth=depth_acceptance(stats["accepted_length_histogram"], depth),
                  tokens=new, lookup_commits=stats.get("lookup_commits", 0), tree_widths=stats.get("tree_widths"),
                  lookup_tokens=stats.get("lookup_tokens"),
                  round_lengths=draft.last_stats.round_lengths.get(0, []))
    if check_exact:
        start = time.perf_counter()
        vanilla = target.generate(ids, **common, return_dict_in_generate=True, output_scores=True)
        reference = vanilla.sequences[0, ids.shape[1]:].tolist()
        _sync(device)
        record["vanilla_seconds"] = time.perf_counter() - start
        record.update(target_confidence(vanilla.scores))
        record["identical"] = reference == new
        if not record["identical"]:
            record["first_divergence"] = next((i for i, (a, b) in enumerate(zip(new, reference)) if a != b),
                                              min(len(new), len(reference)))
    return record


def target_confidence(scores) -> dict:
    """How sure the target itself is of its greedy tokens (the steps' scores of plain generate): the mean
    probability of the token it chose, the mean entropy in nats, and that probability at each step, in
    order (4 decimals; with the record's `round_lengths`, certainty_strata.py sets the draft's hits beside
    it). A draft cannot be accepted more often than a less certain target lets it; paired with tau, this
    says whether a length is harder for the target or for the draft."""
    probs = torch.softmax(torch.stack([step[0] for step in scores]).float(), dim=-1)
    entropy = -(probs * torch.log(probs.clamp(min=1e-30))).sum(dim=-1)
    chosen = probs.max(dim=-1).values
    return {"target_top1_prob": float(chosen.mean()), "target_entropy": float(entropy.mean()),
            "target_top1_probs": [round(p, 4) for p in chosen.tolist()]}


def prompt_key(record: dict) -> tuple:
    """What makes two runs the same measurement: the length, the kind and the prompt's digest."""
    return record["length"], record["kind"], record["prompt_digest"]


def distinct(records: list[dict]) -> list[dict]:
    """Each (length, kind, prompt) once: where a kind's eval text is small (prose: package metadata and
    licenses), two indices can cut the very same prompt, and its run would count twice."""
    seen, kept = set(), []
    for record in records:
        if "prompt_digest" not in record:  # an older run that did not name its prompts: each its own
            kept.append(record)
            continue
        if prompt_key(record) not in seen:
            seen.add(prompt_key(record))
            kept.append(record)
    return kept


def summarize(records: list[dict], depth: int) -> list[dict]:
    """Mean tau per (length, kind) over its distinct prompts (`repeated`: runs of a prompt already
    counted), and pooled acceptance per depth over that group's rounds."""
    rows = []
    kept = distinct(records)
    for length in sorted({r["length"] for r in records}):
        for kind in dict.fromkeys(r["kind"] for r in records):
            group = [r for r in kept if r["length"] == length and r["kind"] == kind]
            if not group:
                continue
            repeated = sum(r["length"] == length and r["kind"] == kind for r in records) - len(group)
            pooled = {}
            for r in group:
                for emitted, n in r["histogram"].items():
                    pooled[int(emitted)] = pooled.get(int(emitted), 0) + n
            checked = [r["identical"] for r in group if "identical" in r]
            sure = [r["target_top1_prob"] for r in group if "target_top1_prob" in r]
            rows.append({"length": length, "kind": kind, "n": len(group), "repeated": repeated,
                         "target_top1_prob": statistics.fmean(sure) if sure else None,
                         "target_entropy": statistics.fmean(r["target_entropy"] for r in group if "target_entropy" in r)
                         if sure else None,
                         "tau_mean": statistics.fmean(r["tau"] for r in group),
                         "tau_min": min(r["tau"] for r in group), "tau_max": max(r["tau"] for r in group),
                         "histogram": dict(sorted(pooled.items())), "depth": depth_acceptance(pooled, depth),
                         "exact": f"{sum(checked)}/{len(checked)}" if checked else None})
    return rows


ISSUE_KINDS = ("code", "prose", "chat")  # the kinds issue 12's mean is taken over; other kinds are reported beside


def ratio(pairs: list[tuple[float, float]]) -> float:
    """Mean of the second taus over mean of the first (a ratio of means, as the cells report them)."""
    return statistics.fmean(b for _, b in pairs) / statistics.fmean(a for a, _ in pairs)


def flatness(records: list[dict], short: int, long: int, resamples: int = 4000) -> dict:
    """Per kind: mean tau at `long` over mean tau at `short` on the (kind, index) pairs measured at both
    (each distinct pair of prompts once), with a 95% interval from a paired bootstrap over those pairs
    (seeded: the same file gives the same interval)."""
    taus = {(r["kind"], r["index"], r["length"]): r for r in records if "index" in r}
    result = {}
    for kind in dict.fromkeys(r["kind"] for r in records):
        pairs, seen = [], set()
        for (k, index, length), record in taus.items():
            other = taus.get((k, index, long))
            if k != kind or length != short or other is None:
                continue
            key = (record.get("prompt_digest", index), other.get("prompt_digest", index))
            if key not in seen:
                seen.add(key)
                pairs.append((record["tau"], other["tau"]))
        if not pairs:
            continue
        draw = random.Random(0)
        boots = sorted(ratio([draw.choice(pairs) for _ in pairs]) for _ in range(resamples))
        result[kind] = {"ratio": ratio(pairs), "low": boots[int(0.025 * resamples)],
                        "high": boots[int(0.975 * resamples) - 1], "pairs": len(pairs)}
    return result


def goals(rows: list[dict], records: list[dict] | None = None) -> dict:
    """The issue's targets, checked on the measured means (None when a needed cell was not run). The
    mean is over ISSUE_KINDS where any was run (else over every kind); with `records`, each kind's
    8k / 2k ratio also gets a bootstrap interval (`flatness`)."""
    def mean(kinds, lo, hi):
        taus = [r["tau_mean"] for r in rows if r["kind"] in kinds and lo <= r["length"] <= hi]
        return statistics.fmean(taus) if taus else None

    def at(kind, length):
        return next((r["tau_mean"] for r in rows if r["kind"] == kind and r["length"] == length), None)

    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    lengths = sorted({r["length"] for r in rows})
    mid = [n for n in lengths if 2048 <= n <= 8192]
    issue_kinds = [kind for kind in kinds if kind in ISSUE_KINDS] or kinds
    result = {"mean_tau_2k_8k": mean(issue_kinds, 2048, 8192), "mean_over_kinds": issue_kinds}
    result["mean_tau_2k_8k_ok"] = None if result["mean_tau_2k_8k"] is None else result["mean_tau_2k_8k"] >= 4.0
    for kind, floor in (("code", 3.5), ("prose", 3.5), ("chat", 2.5)):
        value = mean([kind], 2048, 8192) if kind != "chat" else mean([kind], 0, 10**9)
        result[f"{kind}_tau"] = value
        result[f"{kind}_ok"] = None if value is None else value >= floor
    if mid and mid[0] != mid[-1]:
        for kind in kinds:
            first, last = at(kind, mid[0]), at(kind, mid[-1])
            result[f"{kind}_tau_{mid[-1]}_over_{mid[0]}"] = last / first if first else None
        pooled = [mean(kinds, n, n) for n in (mid[0], mid[-1])]
        result[f"all_tau_{mid[-1]}_over_{mid[0]}"] = pooled[1] / pooled[0] if pooled[0] else None
        ratios = [result[f"{k}_tau_{mid[-1]}_over_{mid[0]}"] for k in kinds]
        result["no_kind_drops_over_10pct_ok"] = all(r is not None and r >= 0.9 for r in ratios)
        if records is not None:
            result[f"flatness_{mid[-1]}_over_{mid[0]}"] = flatness(records, mid[0], mid[-1])
    return result


def markdown(rows: list[dict], depth: int) -> str:
    head = "| context | kind | n | tau mean | tau min-max | " + " | ".join(f"accept d{d}" for d in range(1, depth + 1))
    lines = [head + " | exact vs greedy | target p(its token) / entropy |", "|---|---|---|---|---|" + "---|" * depth + "---|---|"]
    for row in rows:
        accept = " | ".join("-" if a is None else f"{a:.2f}" for a in row["depth"]["accept"])
        sure = "-" if row.get("target_top1_prob") is None else f"{row['target_top1_prob']:.2f} / {row['target_entropy']:.2f}"
        n = f"{row['n']}" + (f" (+{row['repeated']} repeated)" if row.get("repeated") else "")
        lines.append(f"| {row['length']} | {row['kind']} | {n} | {row['tau_mean']:.2f} | "
                     f"{row['tau_min']:.2f}-{row['tau_max']:.2f} | {accept} | {row['exact'] or 'not checked'} | {sure} |")
    return "\n".join(lines)


def plot(records: list[dict], rows: list[dict], path: Path, title: str) -> Path | None:
    """tau vs context, one line (means) and dots (prompts) per kind; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    figure, axis = plt.subplots(figsize=(7, 4.5))
    for number, kind in enumerate(dict.fromkeys(r["kind"] for r in rows)):
        mine = [r for r in rows if r["kind"] == kind]
        axis.plot([r["length"] for r in mine], [r["tau_mean"] for r in mine], marker="o", color=f"C{number}",
                  label=kind)
        dots = [r for r in records if r["kind"] == kind]
        axis.scatter([r["length"] for r in dots], [r["tau"] for r in dots], color=f"C{number}", alpha=0.35, s=14)
    lengths = sorted({r["length"] for r in rows})
    axis.axhspan(3.0, 4.5, color="grey", alpha=0.12, label="LongSpec paper, LongBench (7B-13B targets)")
    axis.axhline(1.0, color="grey", linewidth=0.8)
    axis.set_xscale("log", base=2)
    axis.set_xticks(lengths, [str(n) for n in lengths])
    axis.minorticks_off()
    axis.set_ylim(bottom=0.9)
    axis.set_xlabel("context (prompt tokens)")
    axis.set_ylabel("tau (tokens per round; dots = prompts)")
    axis.set_title(title, fontsize=9)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


JOIN_SETTINGS = ("new_tokens", "tree_widths", "lookup_tokens", "lookup_chains", "align", "dtype", "seed")


def window_read(result: dict):
    """The cross-attention window a run's calls read (None: every entry), as its draft record says since the
    fortieth session, so that asking for the draft config's window and naming the same one join. Runs before
    recorded only what was asked: a number, 0 (every entry), or None, the draft config's, unknown here."""
    if "cross_attention_window" in result["draft"]:
        return result["draft"]["cross_attention_window"]
    asked = result["settings"].get("cross_attention_window")
    return "the draft config's" if asked is None else (None if asked == 0 else asked)


def joined(paths: list[str]) -> dict:
    """One result from the runs in `paths`: the same draft weights and JOIN_SETTINGS, every prompt once
    (one measured in two runs must have given the same tokens and tau there); refused otherwise."""
    results = [json.loads(Path(path).read_text()) for path in paths]
    first = results[0]
    records, seen = [], {}
    for path, result in zip(paths, results):
        differ = [key for key in JOIN_SETTINGS if result["settings"].get(key) != first["settings"].get(key)]
        if window_read(result) != window_read(first):
            differ.append("cross_attention_window")
        if bool(result["settings"].get("rerank_leaves")) != bool(first["settings"].get("rerank_leaves")):
            differ.append("rerank_leaves")  # what the calls did; runs before the forty-third session never re-ranked
        if result["draft"]["weights_digest"] != first["draft"]["weights_digest"]:
            differ.append("draft weights_digest")
        if differ:
            raise ValueError(f"{path} measured otherwise than {paths[0]} ({', '.join(differ)}); allowed: runs of one "
                             "draft with the same settings")
        for record in result["runs"]:
            key = prompt_key(record)
            if key in seen:
                if (seen[key]["tokens"], seen[key]["tau"]) != (record["tokens"], record["tau"]):
                    raise ValueError(f"{path}: the {record['length']}-token {record['kind']} prompt "
                                     f"{record['prompt_digest']} gave other tokens than in an earlier file; allowed: "
                                     "runs that repeat each other where they overlap")
                continue
            seen[key] = record
            records.append(record)
    depth = len(first["settings"]["tree_widths"])
    rows = summarize(records, depth)
    return {"join": list(paths), "machine": [result["machine"] for result in results], "settings": first["settings"],
            "draft": first["draft"], "rows": rows, "goals": goals(rows, records), "runs": records}


LEAVES_RERANKED = {False: "", True: ", leaves re-ranked"}  # in a figure's title


def write_joined(paths: list[str], out_dir: Path) -> dict:
    result = joined(paths)
    settings = result["settings"]
    title = (f"LongSpec draft on SmolLM2-135M-Instruct: tau vs context, {len(paths)} run{'s' if len(paths) > 1 else ''} joined\n({settings['dtype']}, "
             f"greedy, tree {'-'.join(map(str, settings['tree_widths']))}{LEAVES_RERANKED[bool(settings.get('rerank_leaves'))]}, "
             f"chain {settings.get('lookup_tokens')},\n"
             f"{settings['new_tokens']} new tokens, prompts aligned at the {settings['align']})")
    return write_result(result, out_dir, title)


def text_file(spec: str) -> tuple[str, str]:
    """--text-file NAME=PATH: a kind name and a readable file."""
    name, sep, path = spec.partition("=")
    if not sep or not name or not path:
        raise argparse.ArgumentTypeError(f"{spec!r}: allowed NAME=PATH (a kind name and a local text file)")
    if not Path(path).is_file():
        raise argparse.ArgumentTypeError(f"{spec!r}: {path} is not a file; allowed NAME=PATH of a local text file")
    return name, path


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for tau_curve.json / .md / .png")
    parser.add_argument("--join", nargs="+", default=None, metavar="JSON",
                        help="join earlier runs' tau_curve.json files (one draft, one setting) instead of measuring")
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 2048, 4096, 8000])
    parser.add_argument("--kinds", nargs="*", default=["code", "prose", "chat"],
                        help="'chat' or any corpus kind (code, prose, docs, man, ...); none with --text-file: its kinds only")
    parser.add_argument("--prompts", type=int, default=2, help="prompts per (length, kind)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--check-exact", type=int, nargs="*", default=None, metavar="LENGTH",
                        help="also run plain greedy generate and compare (bare: every length)")
    parser.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default=None,
                        help="default: float32 on cpu, bfloat16 on cuda")
    parser.add_argument("--draft", default="embedded", help="'embedded' (the shipped draft) or a draft folder")
    parser.add_argument("--tree-widths", type=int, nargs="+", default=None, help="default: the draft's tree")
    parser.add_argument("--lookup-tokens", type=int, default=None,
                        help="a prompt-lookup chain of this many tokens beside the tree (longspec_lookup_tokens; "
                             "default: the draft config's lookup_tokens; 0: the draft's tree alone)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--first-prompt", type=int, default=0, metavar="I",
                        help="prompt indices I..I+prompts-1 per (length, kind): a later run extends an earlier one "
                             "(join them with --join)")
    parser.add_argument("--lookup-chains", type=int, default=None, metavar="C",
                        help="prompt-lookup chains per round (longspec_lookup_chains; default 1, 2: a second guess)")
    parser.add_argument("--cross-attention-window", type=int, default=None, metavar="W",
                        help="the draft reads only the anchors and the newest W target entries "
                             "(longspec_cross_attention_window; 0: every entry; default: the draft's config, the "
                             "shipped one reads all)")
    parser.add_argument("--align", choices=("end", "start"), default="end",
                        help="end: every length is a suffix of the longest prompt (the same continuation); "
                             "start: each length cut from the start of the stream (before the ninth session)")
    parser.add_argument("--suffix-of", type=int, default=None, metavar="LENGTH",
                        help="--align end: cut every prompt from this longer prompt (default: the longest length), "
                             "so a run of 2048 alone measures the 2048-token suffixes a 2048+8000 run measures")
    parser.add_argument("--rerank-leaves", action=argparse.BooleanOptionalAction, default=None,
                        help="the tree's leaves re-ranked over every drafted node (longspec_rerank_leaves; default: "
                             "the draft config's tree_rerank_leaves)")
    parser.add_argument("--no-compile", action="store_true", help="CUDA: captured rounds without torch.compile")
    parser.add_argument("--text-file", action="append", type=text_file, default=[], metavar="NAME=PATH",
                        help="also a kind NAME cut from this local text file (repeatable)")
    args = parser.parse_args(argv)
    for option, value, ok, allowed in (  # refused before any model loads, by the rules generate applies
            ("--cross-attention-window", args.cross_attention_window, lambda v: v >= 0,
             "an int >= 0 (0: every entry; W: the anchors and the newest W)"),
            ("--lookup-tokens", args.lookup_tokens, is_lookup_length,
             f"an int from 0 to {MAX_LOOKUP_TOKENS} (0: the draft's tree alone)"),
            ("--lookup-chains", args.lookup_chains, lambda v: 1 <= v <= MAX_LOOKUP_CHAINS,
             f"an int from 1 to {MAX_LOOKUP_CHAINS}"),
            ("--prompts", args.prompts, lambda v: v >= 1, "an int >= 1"),
            ("--first-prompt", args.first_prompt, lambda v: v >= 0, "an int >= 0"),
            ("--new-tokens", args.new_tokens, lambda v: v >= 1, "an int >= 1")):
        if value is not None and not ok(value):
            parser.error(f"{option} {value}: allowed: {allowed}")
    try:
        check_suffix_of(args.suffix_of, args.align, args.lengths)
    except ValueError as error:
        parser.error(f"--suffix-of: {error}")
    names = [name for name, _ in args.text_file]
    clashes = sorted({name for name in names if names.count(name) > 1 or name in (*KINDS, "chat")})
    if clashes:
        parser.error(f"--text-file names {clashes} twice or as a corpus kind ({', '.join(KINDS)}, chat: the goals "
                     "read those names); allowed: a new NAME for each file")
    if args.first_prompt and names:
        parser.error("--first-prompt with --text-file: a file's prompts are spread over its length by --prompts; "
                     "allowed: --first-prompt 0 with --text-file")
    if not args.kinds and not names:
        parser.error("--kinds names no kind and no --text-file is given; allowed: at least one of them")
    if max(args.lengths) + args.new_tokens > 8192:
        parser.error(f"length + new tokens must stay within the target's 8192 positions: "
                     f"{max(args.lengths)} + {args.new_tokens}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.join:
        return write_joined(args.join, Path(args.out))
    started = time.perf_counter()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    target, tokenizer = load_embedded_target(device=args.device, dtype=DTYPES.get(args.dtype))
    device = target.get_input_embeddings().weight.device
    draft, source = load_draft_for(target, args.draft)
    if source.startswith("untrained") and args.draft != "untrained":
        raise SystemExit(f"--draft {args.draft}: {source}; a tau curve of a random draft would be mislabeled")
    widths = args.tree_widths or list(draft.config.tree_widths)
    depth = len(widths)
    args.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    skipped = {}
    prompts = build_prompts(tokenizer, args.lengths, args.kinds, args.prompts, args.seed, skipped=skipped,
                            align=args.align, text_files=dict(args.text_file), suffix_of=args.suffix_of,
                            first_index=args.first_prompt)
    if not prompts:
        raise SystemExit(f"no prompts: every kind was skipped ({skipped})")
    exact_lengths = set() if args.check_exact is None else set(args.check_exact or args.lengths)
    print(f"{len(prompts)} prompts on {device} ({time.perf_counter() - started:.0f} s)", flush=True)
    records = []
    partial = out_dir / "runs.jsonl"  # one line per measured prompt: what a run cut by a time limit keeps
    partial.write_text("")
    for prompt in prompts:
        record = run_prompt(target, draft, prompt, args, prompt["length"] in exact_lengths, depth)
        records.append(record)
        with partial.open("a") as stream:
            stream.write(json.dumps(record) + "\n")
        print(f"{record['length']} {record['kind']}-{record['index']} ({record['source']}): tau {record['tau']:.2f}, "
              f"{record['new_tokens']} tokens in {record['seconds']:.1f} s"
              + (f", identical to greedy: {record['identical']}, target p(its token) {record['target_top1_prob']:.3f}"
                 if "identical" in record else ""), flush=True)
    rows = summarize(records, depth)
    dtype = str(target.get_input_embeddings().weight.dtype).replace("torch.", "")
    settings = {k: v for k, v in vars(args).items()}
    settings.update(tree_widths=widths, dtype=dtype, rerank_leaves=draft.last_stats.rerank_leaves)
    result = {"machine": machine_info(device, ["benchmarks/tau_curve.py", *(sys.argv[1:] if argv is None else argv)]),
              "settings": settings, "draft": {"source": source, "weights_digest": model_weights_digest(draft),
                                              "cross_attention_window": draft.last_stats.cross_attention_window},
              "skipped_kinds": skipped, "rows": rows, "goals": goals(rows, records), "runs": records,
              "seconds": time.perf_counter() - started}
    title = (f"LongSpec draft on SmolLM2-135M-Instruct: tau vs context\n({device.type}, {dtype}, greedy, "
             f"tree {'-'.join(map(str, widths))}{LEAVES_RERANKED[draft.last_stats.rerank_leaves]}, {args.new_tokens} new "
             f"tokens, prompts aligned at the {args.align})")
    return write_result(result, out_dir, title)


def write_result(result: dict, out_dir: Path, title: str) -> dict:
    """DIR/tau_curve.json, .md (the table, also printed with the goals) and .png of a measured or joined result."""
    out_dir.mkdir(parents=True, exist_ok=True)
    table = markdown(result["rows"], len(result["settings"]["tree_widths"]))
    (out_dir / "tau_curve.json").write_text(json.dumps(result, indent=1))
    (out_dir / "tau_curve.md").write_text(table + "\n")
    plot(result["runs"], result["rows"], out_dir / "tau_curve.png", title)
    print(table)
    print("goals:", json.dumps(result["goals"]))
    return result


if __name__ == "__main__":
    main()
    raise SystemExit(0)
