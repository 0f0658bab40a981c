"""A draft-free branch for the tree: the tokens that followed the latest earlier occurrence of the
committed text's last n tokens (prompt lookup, as transformers' ``prompt_lookup_num_tokens``).

Long prompts repeat themselves (licenses, catalogs, code, a summary quoting its document), and a
one-layer draft misses part of it; copying costs no model. The chain of ``K`` looked-up tokens hangs
from the root beside the draft's nodes (``TreeLayout.lookup``), so verification keeps whichever
path the target accepts further: the output stays the target's own. Replayed on stored greedy
outputs (benchmarks/lookup_tau.py, 32 CPU prompts), a 16-token chain alone beat the shipped draft
on 12 of them.

Every row's committed ids live in one device buffer and the search is a few (B, C) tensor ops
with static shapes: no host sync, so the round stays one CUDA graph.
"""

from __future__ import annotations

import torch

NGRAM_SIZES = (3, 2, 1)  # the longest recurring suffix wins
MAX_LOOKUP_TOKENS = 32  # every chain node is verified each round, accepted or not
MAX_LOOKUP_CHAINS = 2  # the latest match's continuation, and the latest that guesses another next token
# what a draft trained by `hf-longspec train` sets in its config, as the shipped draft does: the chain that made the
# shipped decoder 2.4x the tree alone in tau (docs/training.md); the config class keeps 0 for drafts built by hand
TRAINED_DRAFT_LOOKUP_TOKENS = 32


def is_lookup_length(value) -> bool:
    """A chain length the call, the draft config and the CLI accept: an int from 0 to MAX_LOOKUP_TOKENS."""
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= MAX_LOOKUP_TOKENS


def search_order(ngram_sizes) -> tuple[int, ...]:
    """The suffix lengths to match, longest first (the longest recurring suffix wins); refused unless one
    or more whole numbers >= 1 (a 0-gram would match anywhere and copy nonsense)."""
    sizes = tuple(ngram_sizes)
    if not sizes or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in sizes):
        raise ValueError(f"ngram_sizes must be one or more whole numbers >= 1 (suffix lengths to match), got {sizes!r}")
    return tuple(sorted(set(sizes), reverse=True))


class PromptLookup:
    """Each row's committed token ids (prompt, then accepted tokens) and the lookup over them."""

    def __init__(self, batch_size: int, capacity: int, length: int, device, ngram_sizes: tuple = NGRAM_SIZES,
                 chains: int = 1):
        self.length = length  # tokens per chain
        self.chains = chains  # 2: also the latest match whose next token differs from the first chain's
        self.ngram_sizes = search_order(ngram_sizes)
        self.history = torch.full((batch_size, capacity + 1), -1, dtype=torch.long, device=device)
        self._steps = torch.arange(length, device=device)[None]
        self._slots = torch.arange(capacity + 1, device=device)[None]

    def start(self, prompt_ids: torch.Tensor, starts: list[int]) -> None:
        """Row b's real tokens (after its ``starts[b]`` tokens of left padding) at slots 0..."""
        self.history.fill_(-1)
        width = prompt_ids.shape[1]
        for row, start in enumerate(starts):
            self.history[row, : width - start] = prompt_ids[row, start:]

    def commit(self, token_ids: torch.Tensor, positions: torch.Tensor, valid: torch.Tensor) -> None:
        """Committed tokens (B, n) at their absolute positions; entries where ``valid`` is False are skipped."""
        slots = torch.where(valid, positions, self.history.shape[1] - 1)  # skipped: the spare last slot
        kept = torch.where(valid, token_ids, self.history.gather(1, slots))
        self.history.scatter_(1, slots, kept)

    def propose(self, lengths: torch.Tensor, roots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, C * K) tokens and their validity: the continuation of the latest earlier match of the
        context's longest recurring suffix (the context is the committed tokens, then the root),
        repeated periodically where it reaches the context's end. With two chains the second is the
        continuation of the latest match (longest suffix first) whose next token differs from the first's."""
        history, slots = self.history, self._slots
        history.scatter_(1, lengths[:, None], roots[:, None])
        end = lengths + 1  # context tokens per row
        batch, width = history.shape
        # shifted[i][:, p] = history[:, p + i]: one shifted copy per offset, shared by every n-gram size (a
        # second chain also reads the token after each match: one offset more)
        shifted = [history] + [torch.cat([history[:, i:], history.new_full((batch, i), -1)], dim=1)
                               for i in range(1, max(self.ngram_sizes) + (self.chains > 1))]
        matches = []  # per n-gram size, longest first: (B, width) where the suffix recurs
        for n in self.ngram_sizes:
            suffix = history.gather(1, (end[:, None] - n + torch.arange(n, device=history.device)[None]).clamp(min=0))
            match = (slots < (end - n)[:, None]) & (end > n)[:, None]  # a match must lie before the suffix itself
            for i in range(n):
                match &= shifted[i] == suffix[:, i : i + 1]
            matches.append((n, match))
        start = self._latest_start(matches, lambda n, match: match)
        chains = [self._chain(start, end)]
        if self.chains > 1:
            first = history.gather(1, start.clamp(min=0)[:, None])  # the first chain's first token
            other = self._latest_start(matches, lambda n, match: match & (shifted[n] != first))
            chains.append(self._chain(torch.where(start >= 0, other, -1), end))
        tokens, valid = (torch.cat(parts, dim=1) for parts in zip(*chains))
        return tokens, valid

    def _latest_start(self, matches, keep) -> torch.Tensor:
        """(B,) where the continuation starts after the latest kept match of the longest suffix that has one (-1: none)."""
        start = torch.full(matches[0][1].shape[:1], -1, dtype=torch.long, device=self.history.device)
        for n, match in matches:
            latest = torch.where(keep(n, match), self._slots, -1).amax(dim=1)
            start = torch.where((start < 0) & (latest >= 0), latest + n, start)
        return start

    def _chain(self, start: torch.Tensor, end: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, K) tokens from ``start`` on and their validity. The text after the match is assumed to repeat
        what followed the earlier occurrence; where that reaches the context's end, the repeat continues
        with its own start (period end - start): a run or a loop of the target's goes on past what has
        been written so far."""
        found = start >= 0
        period = torch.where(found, end - start, 1)
        chain = start[:, None] + self._steps % period[:, None]
        valid = found[:, None].expand_as(chain)
        tokens = self.history.gather(1, chain.clamp(0, self.history.shape[1] - 1))
        return torch.where(valid, tokens, 0), valid  # an invalid node still needs a real token id to embed
