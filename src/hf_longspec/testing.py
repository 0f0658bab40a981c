"""Drafts that know the answer, for tests and GPU checks of exactness; random trees for kernel tests and benchmarks.

`SteeredDraft`: the REAL draft runs every decode step (ring buffer, cross-attention on the live
target cache, tree self-attention); only its returned logits are rewritten so that, wherever a
frontier node sits on a known reference continuation, the reference's next token is proposed at a
chosen rank. Greedy verification must then accept a path that is not the first-child chain, which
makes every cache-commit, tree-mask and position bug visible. Pure tensor ops: it also runs inside
captured CUDA graphs.
"""

from __future__ import annotations

import inspect

import torch

from .modeling_longspec import LongSpecDraftModel

_DECODE_STEP = inspect.signature(LongSpecDraftModel.decode_step)


class SteeredDraft(LongSpecDraftModel):
    """A real LongSpec draft whose proposals are steered onto a known reference sequence.

    reference: (1, L) long, the prompt followed by the target's vanilla greedy continuation.
    ranks: rank plan. A frontier node at absolute position p whose token equals reference[p]
        gets reference[p + 1] at rank ranks[p % len(ranks)] among its children (0 = the top
        proposal, 1 = the second, ...). The draft is never told a node's depth in the tree, so
        the rank is a function of the absolute position: with len(ranks) = k, each round of a
        depth-d tree walks k consecutive positions and meets ranks in rotation, e.g. (0, 1, 2)
        with widths [3, 3, 3] makes every round accept a path through a second and a third
        child. With ranks (0,) and a chain tree it is a perfect oracle (tau = depth + 1).

    How the logits (B, N, V) of the real draft are rewritten, per frontier node, with tensor
    ops only (no host sync, no Python branching on values: safe inside CUDA graphs):
      * every row is scaled to a logit range of at most 1, so a node off the reference gives
        all its children log q close to -log V (order kept: it is still the real draft's);
      * on a reference row with rank r, the reference token is placed between the r-th and
        (r+1)-th largest of the other logits, and those r tokens plus the reference token are
        lifted by `boost`, so their log q is about -log(r + 1).
    A path that follows the reference therefore outscores every path that leaves it (as long as
    log V > log(max rank + 1) + 1), and the tree builder's global top-w per depth keeps the
    reference node whenever width >= rank + 1 at that depth. Nodes that match reference[p] by
    coincidence off the reference path are steered too; that only adds nodes, never hides one.
    """

    boost = 30.0

    @classmethod
    def from_target(cls, target, reference: torch.Tensor | None = None, ranks=(0,), **overrides) -> "SteeredDraft":
        draft = super().from_target(target, **overrides)
        if reference is not None:
            draft.steer(reference, ranks)
        return draft

    def steer(self, reference: torch.Tensor, ranks=(0,)) -> "SteeredDraft":
        """(Re)point the draft at a reference (1, L) and a rank plan; returns self."""
        device = self.norm.weight.device
        reference = torch.as_tensor(reference, dtype=torch.long).reshape(1, -1).to(device)
        self.register_buffer("reference", reference, persistent=False)
        self.register_buffer("rank_plan", torch.tensor(list(ranks), dtype=torch.long, device=device), persistent=False)
        self.max_rank = max(ranks)
        return self

    def decode_step(self, *args, **kwargs):
        bound = _DECODE_STEP.bind(self, *args, **kwargs)
        out = super().decode_step(*args, **kwargs)
        logits = self.steered_logits(out[0], bound.arguments["token_ids"], bound.arguments["position_ids"])
        return (logits, *out[1:])

    def steered_logits(self, logits: torch.Tensor, token_ids: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
        """Pure tensor ops: (B, N, V) real logits -> steered logits (same dtype and device)."""
        x = logits.float()
        x = x - x.amax(dim=-1, keepdim=True)
        x = x / (-x.amin(dim=-1, keepdim=True)).clamp(min=1.0)  # range <= 1, order kept
        reference = self.reference[0]
        length = reference.shape[0]
        here = position_ids.clamp(0, length - 2)
        on_reference = (token_ids == reference[here]) & (position_ids >= 0) & (position_ids < length - 1)
        wanted = reference[here + 1][..., None]  # (B, N, 1)
        rank = self.rank_plan[position_ids.clamp(min=0) % self.rank_plan.shape[0]][..., None]  # (B, N, 1)

        others = x.scatter(-1, wanted, float("-inf"))
        top = others.topk(self.max_rank + 1, dim=-1).values  # (B, N, R+1), descending
        above = top.gather(-1, (rank - 1).clamp(min=0))  # r-th largest other (r >= 1)
        below = top.gather(-1, rank)  # (r+1)-th largest other
        placed = torch.where(rank > 0, (above + below) / 2, below + 0.5)  # strictly between them
        steered = x.scatter(-1, wanted, placed)
        steered = steered + self.boost * (steered >= placed)  # the r tokens above it, and itself
        return torch.where(on_reference[..., None], steered, x).to(logits.dtype)


# ---------------------------------------------------------------- random trees, for kernel tests and benchmarks

def random_parents(tree_len: int, generator: torch.Generator, forest: bool = False) -> list[int]:
    """parents[i] < i (a topologically ordered tree); node 0 is a root, and with ``forest`` others may be."""
    parents = [-1]
    for node in range(1, tree_len):
        if forest and torch.rand((), generator=generator) < 0.2:
            parents.append(-1)
        else:
            parents.append(int(torch.randint(0, node, (), generator=generator)))
    return parents


def ancestor_or_self_mask(parents: list[int]) -> torch.Tensor:
    """bool (T, T): row i may attend column j iff j is i or an ancestor of i."""
    tree_len = len(parents)
    mask = torch.eye(tree_len, dtype=torch.bool)
    for node, parent in enumerate(parents):
        while parent >= 0:
            mask[node, parent] = True
            parent = parents[parent]
    return mask


def random_tree_mask(tree_len: int, generator: torch.Generator, batch: int | None = None) -> torch.Tensor:
    """(T, T), or (B, T, T) with a different random tree per batch row."""
    if batch is None:
        return ancestor_or_self_mask(random_parents(tree_len, generator))
    return torch.stack([ancestor_or_self_mask(random_parents(tree_len, generator, forest=b % 2 == 1))
                        for b in range(batch)])
