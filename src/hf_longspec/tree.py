"""Dynamic draft trees: the draft proposes, level by level, the most likely continuations.

Depth 1 holds the top widths[0] tokens of the root; every later depth holds the global top
widths[d] (parent, token) pairs by cumulative draft log-probability (the paper's tree).
Leaves at the last depth are never run through the draft.

Sampling keeps this shape but stays lossless: how many children each node gets is fixed from
the deterministic top-k ranking *before* its children are drawn, and the children are then
drawn without replacement from the draft distribution q (Gumbel-top-k). Recursive rejection
sampling (verification.py) needs exactly that: candidates that are sequential draws from q.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .draft_state import DraftRingBuffer


@dataclass
class DraftTree:
    """A tree of draft tokens; node 0 is the root (the last committed token)."""

    tokens: torch.Tensor  # (N,) long
    parents: torch.Tensor  # (N,) long, -1 for the root
    depths: torch.Tensor  # (N,) long
    ancestor_mask: torch.Tensor  # (N, N) bool, ancestor-or-self
    draft_probs: torch.Tensor | None = None  # (N_internal, V) q of each node whose children were drawn
    children: list[list[int]] = field(default_factory=list)  # child node ids, in draw order
    token_list: list[int] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.tokens.shape[0]

    @property
    def depth(self) -> int:
        return int(self.depths.max()) if self.size else 0

    def child_with_token(self, node: int, token: int) -> int | None:
        for child in self.children[node]:
            if self.token_list[child] == token:
                return child
        return None


def plan_widths(widths, max_nodes: int | None, max_depth: int) -> list[int]:
    """Tree widths per depth, cut to `max_depth` levels and a total of `max_nodes` nodes."""
    planned, budget = [], max_nodes if max_nodes is not None else float("inf")
    for width in list(widths)[: max(max_depth, 0)]:
        width = int(min(width, budget))
        if width <= 0:
            break
        planned.append(width)
        budget -= width
    return planned


class TreeDrafter:
    """Builds one DraftTree per round from the draft's ring buffer and the live target cache."""

    def __init__(self, draft, logits_processor=None, do_sample: bool = False):
        self.draft = draft
        self.logits_processor = logits_processor if logits_processor else None
        self.do_sample = do_sample

    def _log_probs(self, logits: torch.Tensor, frontier_ids: torch.Tensor | None) -> torch.Tensor:
        """Log q per frontier node, after the same logits processors the target's scores get."""
        scores = logits.float()
        if self.logits_processor is not None:
            scores = self.logits_processor(frontier_ids, scores)
        return torch.log_softmax(scores, dim=-1)

    @torch.no_grad()
    def build(
        self,
        ring: DraftRingBuffer,
        sequence: torch.Tensor,
        target_cache,
        widths: list[int],
    ) -> DraftTree:
        """sequence: (1, L) committed ids ending with the root token (at position L-1)."""
        device = sequence.device
        root_position = sequence.shape[1] - 1
        max_nodes = 1 + sum(widths)
        tokens = torch.empty(max_nodes, dtype=torch.long, device=device)
        parents = torch.full((max_nodes,), -1, dtype=torch.long, device=device)
        depths = torch.zeros(max_nodes, dtype=torch.long, device=device)
        scores = torch.zeros(max_nodes, dtype=torch.float32, device=device)
        ancestors = torch.zeros(max_nodes, max_nodes, dtype=torch.bool, device=device)
        paths = torch.zeros(max_nodes, max(len(widths), 1), dtype=torch.long, device=device)
        tokens[0] = sequence[0, -1]
        ancestors[0, 0] = True
        probs = [] if self.do_sample else None

        tree_keys = tree_values = None
        start, count = 0, 1  # frontier = nodes [start, start + count)
        for depth, width in enumerate(widths, start=1):
            frontier = torch.arange(start, start + count, device=device)
            logits, new_keys, new_values = self.draft.decode_step(
                ring,
                tokens[frontier][None],
                (root_position + depth - 1) + torch.zeros(1, count, dtype=torch.long, device=device),
                tree_keys,
                tree_values,
                ancestors[frontier][:, : start + count][None],
                target_cache,
            )
            tree_keys = new_keys if tree_keys is None else torch.cat([tree_keys, new_keys], dim=2)
            tree_values = new_values if tree_values is None else torch.cat([tree_values, new_values], dim=2)

            frontier_ids = None
            if self.logits_processor is not None:
                frontier_ids = torch.cat([sequence.expand(count, -1), paths[frontier, : depth - 1]], dim=1)
            log_q = self._log_probs(logits[0], frontier_ids)  # (count, V)
            parent_local, child_tokens, child_log_q = self._choose_children(log_q, scores[frontier], width)
            if probs is not None:
                probs.append(log_q.exp())

            added = child_tokens.shape[0]
            if added == 0:
                break
            new = torch.arange(start + count, start + count + added, device=device)
            parent = frontier[parent_local]
            tokens[new] = child_tokens
            parents[new] = parent
            depths[new] = depth
            scores[new] = scores[parent] + child_log_q
            ancestors[new] = ancestors[parent]
            ancestors[new, new] = True
            paths[new] = paths[parent]
            paths[new, depth - 1] = child_tokens
            start, count = start + count, added

        size = start + count
        token_list = tokens[:size].tolist()
        parent_list = parents[:size].tolist()
        children: list[list[int]] = [[] for _ in range(size)]
        for node in range(1, size):
            children[parent_list[node]].append(node)
        return DraftTree(
            tokens=tokens[:size],
            parents=parents[:size],
            depths=depths[:size],
            ancestor_mask=ancestors[:size, :size],
            draft_probs=torch.cat(probs, dim=0) if probs else None,
            children=children,
            token_list=token_list,
        )

    def _choose_children(self, log_q: torch.Tensor, parent_scores: torch.Tensor, width: int):
        """(parent index in frontier, token, log q(token)) for the next depth, `width` at most."""
        count, vocab = log_q.shape
        k = min(width, vocab)
        top_log_q, top_tokens = log_q.topk(k, dim=-1)  # (count, k)
        candidate = (parent_scores[:, None] + top_log_q).flatten()
        if not self.do_sample:
            # no host sync: a -inf candidate (a token the processors forbid) is harmless, the
            # target's processed argmax never picks it
            picked = candidate.topk(min(width, candidate.numel())).indices
            parent_local = picked // k
            order = torch.argsort(parent_local * k + picked % k)  # group by parent, best first
            picked = picked[order]
            return parent_local[order], top_tokens.flatten()[picked], top_log_q.flatten()[picked]
        # sampling: a node may get only as many children as q has tokens with mass
        picked = candidate.topk(min(width, int(torch.isfinite(candidate).sum()))).indices
        return self._sample_children(log_q, torch.bincount(picked // k, minlength=count))

    @staticmethod
    def _sample_children(log_q: torch.Tensor, counts: torch.Tensor):
        """Draw counts[f] children of frontier node f without replacement from q_f (Gumbel-top-k);
        the counts were fixed before drawing, so each node's children are sequential draws."""
        most = int(counts.max())
        if most == 0:
            empty = log_q.new_empty(0, dtype=torch.long)
            return empty, empty, log_q.new_empty(0)
        uniform = torch.rand_like(log_q).clamp_(min=1e-20)
        perturbed = log_q - torch.log(-torch.log(uniform))
        drawn = perturbed.topk(most, dim=-1).indices  # (count, most), in draw order
        rank = torch.arange(most, device=log_q.device)[None]
        keep = rank < counts[:, None]
        parent_local = torch.arange(log_q.shape[0], device=log_q.device)[:, None].expand_as(drawn)[keep]
        child_tokens = drawn[keep]
        return parent_local, child_tokens, log_q[parent_local, child_tokens]
