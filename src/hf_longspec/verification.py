"""Deciding which drafted tokens the target keeps, so the output is exactly the target's.

Greedy: walk from the root; at each node the target's next token is argmax of its processed
scores; follow the child holding that token, else emit it as the bonus token and stop.

Sampling: recursive rejection sampling over each node's children (drawn without replacement
from q): accept child c with probability min(1, p(c)/q(c)); on rejection p <- norm(max(p-q, 0))
and q <- q without c, renormalized. If no child survives, the bonus token is drawn from the
residual p. Every emitted token is then distributed exactly as the target's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .tree import DraftTree


@dataclass
class VerifiedPath:
    accepted_nodes: list[int]  # tree node ids kept in the target cache, root first
    tokens: list[int]  # emitted tokens: accepted children, then the bonus token
    scores: list[torch.Tensor] = field(default_factory=list)  # processed target scores per emitted token (1, V)
    logits: list[torch.Tensor] = field(default_factory=list)  # raw target logits per emitted token (1, V)


class PathVerifier:
    """Walks a verified tree with the target's logits (T, V) and the generation's processors."""

    def __init__(self, logits_processor=None, do_sample: bool = False, keep_scores: bool = False):
        self.logits_processor = logits_processor if logits_processor else None
        self.do_sample = do_sample
        self.keep_scores = keep_scores

    def _scores(self, sequence: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
        return self.logits_processor(sequence, logits) if self.logits_processor is not None else logits

    @torch.no_grad()
    def verify(self, tree: DraftTree, target_logits: torch.Tensor, sequence: torch.Tensor) -> VerifiedPath:
        """sequence: (1, L) committed ids ending with the root."""
        if not self.do_sample and self.logits_processor is None and not self.keep_scores:
            return self._greedy_unprocessed(tree, target_logits)
        path = VerifiedPath(accepted_nodes=[0], tokens=[])
        node = 0
        while True:
            logits = target_logits[node : node + 1]
            scores = self._scores(sequence, logits.clone())
            if self.keep_scores:
                path.scores.append(scores)
                path.logits.append(logits)
            if self.do_sample:
                token, child = self._rejection_sample(tree, node, scores[0])
            else:
                token = int(scores[0].argmax())
                child = tree.child_with_token(node, token)
            path.tokens.append(token)
            if child is None:
                return path
            path.accepted_nodes.append(child)
            node = child
            sequence = torch.cat([sequence, sequence.new_tensor([[token]])], dim=1)

    @staticmethod
    def _greedy_unprocessed(tree: DraftTree, target_logits: torch.Tensor) -> VerifiedPath:
        """Greedy without processors: one argmax over all nodes, one device sync."""
        best = target_logits.argmax(dim=-1).tolist()
        path = VerifiedPath(accepted_nodes=[0], tokens=[])
        node = 0
        while True:
            token = best[node]
            path.tokens.append(token)
            child = tree.child_with_token(node, token)
            if child is None:
                return path
            path.accepted_nodes.append(child)
            node = child

    @staticmethod
    def _rejection_sample(tree: DraftTree, node: int, scores: torch.Tensor) -> tuple[int, int | None]:
        p = torch.softmax(scores.float(), dim=-1)
        children = tree.children[node]
        if not children:
            return int(torch.multinomial(p, 1)), None
        q = tree.draft_probs[node].float().clone()
        for child in children:
            token = tree.token_list[child]
            if float(torch.rand((), device=p.device)) * float(q[token]) < float(p[token]):
                return token, child
            residual = torch.clamp(p - q, min=0)
            total = residual.sum()
            p = residual / total if total > 0 else p
            q[token] = 0
            q = q / q.sum()
        return int(torch.multinomial(p, 1)), None
