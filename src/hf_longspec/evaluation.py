"""Measuring a draft's acceptance (tau) on held-out long prompts through the real generate path."""

from __future__ import annotations

import torch

from .corpus import long_prompt_ids


def held_out_prompts(tokenizer, lengths=(2048, 4096, 8000), kinds=("code", "prose"), per_cell: int = 1,
                     device=None) -> list[tuple[str, int, torch.Tensor]]:
    """(kind, length, ids) prompts from the eval split of local text (never used for training)."""
    prompts = []
    for kind in kinds:
        for length in lengths:
            for seed in range(per_cell):
                ids = torch.tensor([long_prompt_ids(tokenizer, length, kind=kind, split="eval", seed=100 + seed)])
                prompts.append((kind, length, ids.to(device) if device is not None else ids))
    return prompts


@torch.no_grad()
def measure_tau(target, draft, prompts, max_new_tokens: int = 64, **generate_kwargs) -> dict:
    """Greedy speculative generation on each prompt; tau = tokens emitted per verification round,
    pooled over all prompts (and per prompt)."""
    rows, emitted, rounds = [], 0, 0
    for kind, length, ids in prompts:
        target.generate(ids, assistant_model=draft, max_new_tokens=max_new_tokens, do_sample=False, **generate_kwargs)
        stats = draft.last_stats
        rows.append({"kind": kind, "length": length, **stats.as_dict()})
        emitted += stats.emitted_tokens
        rounds += stats.rounds
    return {"tau": emitted / max(rounds, 1), "per_prompt": rows}
