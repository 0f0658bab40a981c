"""Deciding which drafted tokens the target keeps, so the output is exactly the target's.

Greedy (``greedy_accept``, device only): a node is accepted when its parent is accepted and its
token is the target's argmax at the parent; the accepted nodes form one path from the root, and
the target's argmax at the path's last node is the bonus token. Vectorised over the tree, one
depth at a time: no host sync, so it runs inside the round's CUDA graph. A lookup chain
(``TreeLayout.lookup``) is a second candidate path (with ``lookup_chains`` > 1, one per chain); the longest
accepted path wins, the draft's on a tie, then the earlier chain's.

Sampling with row-wise warpers only runs on the device instead (sampled_accept.py: the same law and
walk order). With other logits processors or returned scores (``PathVerifier``, on the host): walk from the
root; greedy follows the child holding the processed argmax (both, where the draft's child and the
lookup chain's hold it, keeping the longer path). Sampling does recursive rejection
sampling over each node's children (drawn without replacement from q): accept child c with
probability min(1, p(c)/q(c)); on rejection p <- norm(max(p-q, 0)) and q <- q without c,
renormalized. If no child survives, the lookup chain's node is tried against the residual, as a
proposal q = one-hot, and the bonus token is drawn from what is left (``_rejection_sample``). Every
emitted token is then distributed exactly as the target's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .draft_tree import HostTree, TreeBuffers, TreeLayout
from .rejection import CHILDREN_TRIED, draw, try_chain_token, try_child


@dataclass
class AcceptedPaths:
    """The round's result per row, on the device (all shapes static)."""

    path_nodes: torch.Tensor  # (B, P+1) (P: layout.path_length) node ids, root first; entries past `accepted` are padding
    accepted: torch.Tensor  # (B,) nodes kept in the cache (root included) = tokens emitted
    emitted: torch.Tensor  # (B, P+1) accepted tokens after the root, then the bonus token
    non_chain: torch.Tensor  # (B,) bool: some accepted node is not its parent's first child
    lookup: torch.Tensor | None = None  # (B,) bool: the lookup chain's path was taken


def first_child_flags(parents: torch.Tensor) -> torch.Tensor:
    """(B, N) bool: node is the best-ranked child of its parent (no earlier node has its parent; a parent's
    drafted children come before its re-ranked leaves, each group in rank order). The root counts as one."""
    ids = torch.arange(parents.shape[1], device=parents.device)
    earlier_sibling = (parents[:, :, None] == parents[:, None, :]) & (ids[None, :] < ids[:, None])[None] & (ids > 0)
    return ~earlier_sibling.any(dim=2)


def greedy_accept(layout: TreeLayout, tree: TreeBuffers, target_logits: torch.Tensor) -> AcceptedPaths:
    """target_logits: (B, N, V). Device ops only."""
    best = target_logits.argmax(dim=-1)  # (B, N) the target's next token after each node
    batch = best.shape[0]
    accepted = torch.zeros_like(tree.valid)
    accepted[:, 0] = True
    path = torch.zeros(batch, layout.path_length + 1, dtype=torch.long, device=best.device)
    count = torch.ones(batch, dtype=torch.long, device=best.device)
    offsets = layout.offsets
    for depth, width in enumerate(layout.widths, start=1):  # the last block: re-ranked leaves hang at any depth
        nodes = slice(offsets[depth], offsets[depth] + width)
        parent = tree.parents[:, nodes]
        ok = accepted.gather(1, parent) & (tree.tokens[:, nodes] == best.gather(1, parent)) & tree.valid[:, nodes]
        accepted[:, nodes] = ok
        # at most one node per block is accepted, below the path's last node (children of one node hold
        # distinct tokens, and a leaf under a node whose drafted child was right never holds that child's token)
        hit = ok.any(dim=1)
        path.scatter_(1, count[:, None], torch.where(hit, offsets[depth] + ok.int().argmax(dim=1), 0)[:, None])
        count += hit
    use_lookup = None
    for first in layout.chain_offsets:  # each lookup chain; a later one only where it accepts more
        chain = slice(first, first + layout.lookup)
        ok = (tree.tokens[:, chain] == best.gather(1, tree.parents[:, chain])) & tree.valid[:, chain]
        chain_count = 1 + ok.long().cumprod(dim=1).sum(dim=1)  # a chain node needs every one before it
        longer = chain_count > count
        use_lookup = longer if use_lookup is None else use_lookup | longer
        chain_path = torch.zeros_like(path)
        chain_path[:, 1 : layout.lookup + 1] = torch.arange(chain.start, chain.stop, device=best.device)
        path = torch.where(longer[:, None], chain_path, path)
        count = torch.where(longer, chain_count, count)
    last = path.gather(1, (count - 1)[:, None])
    bonus = best.gather(1, last)
    emitted = torch.cat([tree.tokens.gather(1, path[:, 1:]), bonus], dim=1)
    emitted.scatter_(1, count[:, None] - 1, bonus)
    return AcceptedPaths(path, count, emitted, path_kinds(layout, tree, path, count, use_lookup), use_lookup)


def path_kinds(layout: TreeLayout, tree: TreeBuffers, path: torch.Tensor, count: torch.Tensor,
               use_lookup: torch.Tensor | None) -> torch.Tensor:
    """(B,) bool: the accepted path leaves the chain of first children (or is the lookup chain's)."""
    steps = torch.arange(layout.path_length + 1, device=path.device)[None]
    on_path = (steps > 0) & (steps < count[:, None])
    branching = ~first_child_flags(tree.parents).gather(1, path)
    non_chain = (branching & on_path).any(dim=1)
    if use_lookup is not None:  # a chain node is no draft node's first child
        non_chain = non_chain | use_lookup
    return non_chain


@dataclass
class VerifiedPath:
    accepted_nodes: list[int]  # tree node ids kept in the target cache, root first
    tokens: list[int]  # emitted tokens: accepted children, then the bonus token
    scores: list[torch.Tensor] = field(default_factory=list)  # processed target scores per emitted token (1, V)
    logits: list[torch.Tensor] = field(default_factory=list)  # raw target logits per emitted token (1, V)


class PathVerifier:
    """Walks a verified tree on the host with the target's logits (N, V) and the processors."""

    def __init__(self, logits_processor=None, do_sample: bool = False, keep_scores: bool = False):
        self.logits_processor = logits_processor if logits_processor else None
        self.do_sample = do_sample
        self.keep_scores = keep_scores

    def _scores(self, sequence: torch.Tensor, logits: torch.Tensor, row: int, batch: int) -> torch.Tensor:
        if self.logits_processor is None:
            return logits
        if batch == 1:
            return self.logits_processor(sequence, logits)
        # Processors may keep state per batch position (the repetition penalty keeps each row's padding
        # length): hand them a whole batch whose every row is this one, and keep this row's result.
        return self.logits_processor(sequence.repeat(batch, 1), logits.repeat(batch, 1))[row : row + 1]

    @torch.no_grad()
    def verify(self, tree: HostTree, target_logits: torch.Tensor, sequence: torch.Tensor, row: int = 0,
               batch: int = 1) -> VerifiedPath:
        """sequence: (1, L) committed ids of batch row ``row`` (of ``batch``), ending with the root."""
        if self.do_sample:
            return self._sample_walk(tree, target_logits, sequence, row, batch)
        return self._greedy_walk(tree, target_logits, 0, sequence, row, batch)

    def _node_scores(self, target_logits, node, sequence, row, batch, path: VerifiedPath) -> torch.Tensor:
        logits = target_logits[node : node + 1].float()
        scores = self._scores(sequence, logits.clone(), row, batch)
        if self.keep_scores:
            path.scores.append(scores)
            path.logits.append(logits)
        return scores[0]

    def _greedy_walk(self, tree: HostTree, target_logits: torch.Tensor, node: int, sequence: torch.Tensor, row: int,
                     batch: int) -> VerifiedPath:
        """The verified path from ``node`` (already accepted) down, ``node`` first."""
        here = VerifiedPath(accepted_nodes=[node], tokens=[])
        token = int(self._node_scores(target_logits, node, sequence, row, batch, here).argmax())
        here.tokens.append(token)
        candidates = tree.children_with_token(node, token)  # a draft child and the chain's: both are right
        if not candidates:
            return here
        grown = torch.cat([sequence, sequence.new_tensor([[token]])], dim=1)
        below = [self._greedy_walk(tree, target_logits, child, grown, row, batch) for child in candidates]
        best = max(below, key=lambda path: len(path.tokens))  # the longer path; the draft's on a tie
        return VerifiedPath(here.accepted_nodes + best.accepted_nodes, here.tokens + best.tokens,
                            here.scores + best.scores, here.logits + best.logits)

    def _sample_walk(self, tree: HostTree, target_logits: torch.Tensor, sequence: torch.Tensor, row: int,
                     batch: int) -> VerifiedPath:
        """Recursive rejection sampling down the tree. While the lookup chain holds the same tokens as
        the draft's path, the walk stands on both (the two nodes see the same text, so the target's p
        is the same): the draft's children are tried first, then the chain's next token."""
        path = VerifiedPath(accepted_nodes=[0], tokens=[])
        draft_path, chain_path = [0], [0]  # the two sides' nodes while both hold the path's tokens
        node, twin = 0, 0  # the draft-side node and the chain-side node (None: that side has left the path)
        while True:
            scores = self._node_scores(target_logits, node if node is not None else twin, sequence, row, batch, path)
            children = tree.draft_children(node) if node is not None else []
            chain = tree.chain_child(twin) if twin is not None else None
            token, child = self._rejection_sample(tree, node, children[:CHILDREN_TRIED], chain, scores)
            path.tokens.append(token)
            if child is None:
                break
            node = next((c for c in children if tree.token_list[c] == token), None)
            twin = chain if chain is not None and tree.token_list[chain] == token else None
            if node is not None:
                draft_path.append(node)
            if twin is not None:
                chain_path.append(twin)
            sequence = torch.cat([sequence, sequence.new_tensor([[token]])], dim=1)
        path.accepted_nodes = draft_path if node is not None else chain_path  # a side holding every accepted token
        return path

    @staticmethod
    def _rejection_sample(tree: HostTree, node: int | None, children: list[int], chain: int | None,
                          scores: torch.Tensor) -> tuple[int, int | None]:
        """One token from the target's p, and the child holding it if one was accepted.

        The draft's ``children`` of ``node`` (its first draws without replacement from q) go first. Then the
        lookup chain's node ``chain``, a proposal with all its mass on its token t, against what is
        left of p: accepted with probability p(t), else t leaves p (renormalized) before the bonus is
        drawn. The chain's token does not depend on the draft's draws, so this last stage keeps the
        token distributed as p: p(t) + 0 for t, and (1 - p(t)) * p(u) / (1 - p(t)) for any other u."""
        p = torch.softmax(scores.float(), dim=-1)[None]  # one row of the law the device walk runs on a batch
        offered = torch.ones(1, dtype=torch.bool, device=p.device)
        if children:
            q = tree.draft_probs[node].float()[None]
            for child in children:
                token = torch.tensor([tree.token_list[child]], device=p.device)
                p, q, accepted = try_child(p, q, token, offered, torch.rand(1, device=p.device))
                if bool(accepted):
                    return tree.token_list[child], child
        if chain is not None:
            token = torch.tensor([tree.token_list[chain]], device=p.device)
            p, accepted = try_chain_token(p, token, offered, torch.rand(1, device=p.device))
            if bool(accepted):
                return tree.token_list[chain], chain
        return int(draw(p)[0]), None
