"""Measuring a draft's acceptance (tau) on held-out long prompts through the real generate path."""

from __future__ import annotations

import hashlib
import statistics

import torch

from .corpus import long_prompt_ids


def prompt_digest(ids) -> str:
    """A short name for a prompt's token ids (a list or a tensor), stored beside what was measured on
    it: the eval text is the machine's own and the prompt builders change between sessions, so a later
    script that rebuilds or pairs prompts can tell whether they are the same ones."""
    flat = ids.flatten().tolist() if isinstance(ids, torch.Tensor) else ids
    return hashlib.sha256(",".join(str(int(token)) for token in flat).encode()).hexdigest()[:16]


def load_run_records(path: str) -> list[dict]:
    """The per-prompt records of a benchmarks/tau_curve.py run: its tau_curve.json's "runs", or the lines of
    the runs.jsonl it writes as it goes (what a run cut by a time limit leaves)."""
    import json
    from pathlib import Path

    text = Path(path).read_text()
    if str(path).endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)["runs"]


def paired_difference(deltas: list[float]) -> dict:
    """One draft's tau less another's, prompt by prompt on the same prompts: the mean difference, its
    standard error over the prompts, and how many prompts are better, worse or equal. Pairing removes
    the prompts' own spread, which is far larger than a training lever's effect."""
    deltas = list(deltas)
    return {"mean": statistics.mean(deltas),
            "stderr": statistics.stdev(deltas) / len(deltas) ** 0.5 if len(deltas) > 1 else float("nan"),
            "better": sum(d > 1e-9 for d in deltas), "worse": sum(d < -1e-9 for d in deltas),
            "equal": sum(abs(d) <= 1e-9 for d in deltas), "count": len(deltas)}


def seed_averaged_deltas(runs: dict[int, list[float]], base: dict[int, list[float]]) -> list[float]:
    """Per prompt, tau of `runs` less that of `base` (each {seed: per-prompt tau}), averaged over the seeds
    both ran: a seed's runs saw the same batches, and a prompt's seeds are not independent samples, so
    the prompt is the unit `paired_difference` counts. Empty when no seed is shared."""
    shared = sorted(set(runs) & set(base))
    if not shared:
        return []
    return [statistics.mean(runs[seed][i] - base[seed][i] for seed in shared) for i in range(len(runs[shared[0]]))]


def same_prompts(first: list[dict], second: list[dict]) -> bool:
    """Whether two reports' prompt lists ({kind, length[, digest]} each, in order) name the same prompts:
    equal kinds and lengths, and equal digests where both recorded one (reports of the sixteenth session
    on do)."""
    def plain(entry):
        return {key: value for key, value in entry.items() if key != "digest"}

    return len(first) == len(second) and all(
        plain(a) == plain(b) and (a.get("digest") is None or b.get("digest") is None or a["digest"] == b["digest"])
        for a, b in zip(first, second))


def known_digests(first: list[dict], second: list[dict]) -> list[dict]:
    """`first` (a prompt list that `same_prompts` pairs with `second`) with each entry's digest taken from
    whichever list recorded one, so that joining reports keeps every digest for the next check."""
    joined = []
    for a, b in zip(first, second):
        digest = a.get("digest") or b.get("digest")
        joined.append({**a, "digest": digest} if digest else a)
    return joined


def suffix_ids(ids: list[int], length: int, head: int = 0, tail: int = 0) -> list[int]:
    """``ids`` cut to ``length`` tokens from the front, its first ``head`` and last ``tail`` tokens (a
    chat template around a document) kept whole: a shorter prompt that ends as ``ids`` does, so that
    tau at two lengths continues the same text and differs by the context alone."""
    room = length - head - tail
    if not 1 <= room <= len(ids) - head - tail:
        raise ValueError(f"cannot cut a {len(ids)}-token prompt to {length} tokens (its template takes {head + tail})")
    document = ids[head:len(ids) - tail]
    return ids[:head] + document[len(document) - room:] + ids[len(ids) - tail:]


def held_out_prompts(tokenizer, lengths=(2048, 4096, 8000), kinds=("code", "prose"), per_cell: int = 1,
                     device=None) -> list[tuple[str, int, torch.Tensor]]:
    """(kind, length, ids) prompts from the eval split of local text (never used for training). The
    shorter prompts of a (kind, seed) are suffixes of its longest (`suffix_ids`): every length
    continues the same text."""
    prompts = []
    for kind in kinds:
        for seed in range(per_cell):
            longest = long_prompt_ids(tokenizer, max(lengths), kind=kind, split="eval", seed=100 + seed)
            for length in lengths:
                ids = torch.tensor([suffix_ids(longest, length)])
                prompts.append((kind, length, ids.to(device) if device is not None else ids))
    prompts.sort(key=lambda prompt: (kinds.index(prompt[0]), list(lengths).index(prompt[1])))
    return prompts


def own_round(draft) -> dict:
    """generate() options naming the draft config's own tree, leaves and chain (its GPU round), which a call on a
    CPU replaces by the config's cpu_tree_widths, cpu_tree_rerank_leaves and cpu_lookup_tokens unless it names
    them, and rounds only (a call on a CPU may otherwise take plain steps where rounds lose): tau measures the
    draft, not a speed choice."""
    return {"longspec_tree_widths": list(draft.config.tree_widths), "longspec_lookup_tokens": draft.config.lookup_tokens,
            "longspec_rerank_leaves": bool(getattr(draft.config, "tree_rerank_leaves", False)),
            "longspec_plain_steps": False}


@torch.no_grad()
def measure_tau(target, draft, prompts, max_new_tokens: int = 64, **generate_kwargs) -> dict:
    """Greedy speculative generation on each prompt; tau = tokens emitted per verification round,
    pooled over all prompts (and per prompt). The draft's own tree and chain unless the caller names
    them, on every device: a config's CPU round (cpu_tree_widths) is a speed choice, not the draft's."""
    generate_kwargs = {**own_round(draft), **generate_kwargs}
    rows, emitted, rounds = [], 0, 0
    for kind, length, ids in prompts:
        target.generate(ids, assistant_model=draft, max_new_tokens=max_new_tokens, do_sample=False, **generate_kwargs)
        stats = draft.last_stats
        rows.append({"kind": kind, "length": length, **stats.as_dict()})
        emitted += stats.emitted_tokens
        rounds += stats.rounds
    return {"tau": emitted / max(rounds, 1), "per_prompt": rows}
