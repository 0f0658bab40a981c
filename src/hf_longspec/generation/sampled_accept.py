"""Recursive rejection sampling over the drafted tree, on the device: a sampled round needs no host
sync, so it replays as one CUDA graph, as a greedy round does.

The law (``rejection.py``, shared with the host walk ``PathVerifier._sample_walk``) and the walk's
order are the host walk's. At each accepted node the draft's children are tried in draw order: child
x is accepted with probability min(1, p(x)/q(x)); on rejection p <- norm(max(p - q, 0)) and x leaves
q. Then the lookup chain's token t is tried as a one-hot proposal against what is left of p:
accepted with probability p(t), else t leaves p. If nothing was accepted, the bonus token is drawn
from what is left. While the chain holds the path's tokens the walk stands on both sides, so the
chain never costs the draft a child.

Static shapes: at each depth every row tries ``CHILDREN_TRIED`` slots, its current node's first draws
(the next depth's slots, then, with re-ranked leaves, the leaf slots), found in the slots that may hold
them; a slot that is not a child of that node, or a row that has stopped, changes nothing. Each try is a
pass over the vocabulary: trying every slot (20 to 32 a depth with re-ranked leaves) made a round take 18%
longer on an H100, for draws past the eighth that held under 1% of accepted children (forty-fifth session).
The uniforms are drawn up front.

Only processors that are a function of each row's logits alone can score every tree node at once
(``DeviceWarpers``: temperature, top-k, top-p, min-p). Any other processor (a repetition penalty reads
the text) and returned scores keep the host walk.
"""

from __future__ import annotations

import functools

import torch
from transformers.generation.logits_process import (
    MinPLogitsWarper,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

from .acceptance import AcceptedPaths, path_kinds
from .draft_tree import TreeBuffers, TreeLayout
from .rejection import CHILDREN_TRIED, draw, try_chain_token, try_child

# transformers' warpers whose output row depends on that row's scores only (not on input_ids)
ROW_WISE_WARPERS = (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper, MinPLogitsWarper)


class DeviceWarpers:
    """The call's logits processors, when each is a row-wise warper: applied to every node's logits
    at once, inside the captured round. ``key`` names their settings: a graph captured with one
    temperature must not be replayed for another (the settings are constants inside the graph)."""

    row_wise = True  # the drafter applies it to every frontier node at once, without their texts

    def __init__(self, processors: tuple):
        self.processors = processors
        self.key = tuple((type(p).__name__, tuple(sorted(vars(p).items()))) for p in processors)

    @classmethod
    def from_processors(cls, processors) -> "DeviceWarpers | None":
        """None if some processor is not a row-wise warper (then the host walks the tree)."""
        processors = tuple(processors or ())
        if not all(type(p) in ROW_WISE_WARPERS for p in processors):
            return None
        return cls(processors)

    def __call__(self, input_ids, scores: torch.Tensor) -> torch.Tensor:
        """scores (..., V) float32, processed row by row; ``input_ids`` is ignored (row-wise warpers)."""
        flat = scores.reshape(-1, scores.shape[-1])
        for processor in self.processors:
            flat = processor(None, flat)
        return flat.view(scores.shape)


def _try_children(p, q, tokens, parents, valid, node, offered, uniforms):
    """A node's children in draw order, one depth's slots (B, W) at a time: a slot takes part where
    the row is ``offered`` the draft's side, nothing was accepted yet, and its parent is ``node``.
    Returns (p, accepted token, whether one was)."""
    taken = torch.zeros_like(offered)
    token = torch.zeros_like(node)
    for slot in range(tokens.shape[1]):
        candidate = offered & ~taken & valid[:, slot] & (parents[:, slot] == node)
        p, q, accepted = try_child(p, q, tokens[:, slot], candidate, uniforms[:, slot])
        token = torch.where(accepted, tokens[:, slot], token)
        taken = taken | accepted
    return p, token, taken


def sampled_walk(compiled: bool):
    """The sampled round's walk: ``sample_accept``, compiled whole where the round is compiled (one compiled function
    for every decoder: dynamo's cache lives on it), with the slots looked up outside it (a host list copied to the
    device must not be traced). Compiled, the walk's few hundred small ops outside its tries (the node's rows of p and
    q, which slots hold its children, the move down, the bonus draw) fuse with the tries into a few kernels; eager
    inside a captured round, each is a kernel of its own. On an H100 at 8k the walk took 0.56 ms against 1.03 ms with
    each depth's tries compiled alone (a round 4.26 against 4.69 ms, forty-sixth session), and beside the 32-token
    chain 0.60 against 1.35 ms (a round 4.47 against 5.18 ms, forty-eighth session: the chain's steps past the tree
    are taken at once, ``_chain_tail``, so the walk no longer unrolls 33 steps), at the price of 20-30 s more
    compiling in a first sampled call. Its random draws are the compiled code's, fresh on every replay of a captured
    round, as the drafting's compiled Gumbel draws are."""
    if not compiled:
        return sample_accept
    global _compiled_walk
    if _compiled_walk is None:
        _compiled_walk = torch.compile(sample_accept)

    def walk(layout: TreeLayout, tree: TreeBuffers, target_scores: torch.Tensor,
             warpers: DeviceWarpers | None = None, children_tried: int = CHILDREN_TRIED) -> AcceptedPaths:
        return _compiled_walk(layout, tree, target_scores, warpers, children_tried,
                              child_slot_ids(layout, target_scores.device))
    return walk


_compiled_walk = None


@functools.lru_cache(maxsize=64)
def child_slot_ids(layout: TreeLayout, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Per depth, the node ids that may hold a child of a node there (the next depth's, then any re-ranked
    leaves). Made once per layout and device, in the eager warm-up round: copying host lists to the device
    is not allowed while a CUDA graph captures."""
    return tuple(torch.tensor(layout.child_slots(depth), device=device) for depth in range(layout.depth))


def _first_children(slots: torch.Tensor, is_child: torch.Tensor, count: int) -> torch.Tensor:
    """(B, count) node ids: each row's first ``count`` children of its node among ``slots`` (``is_child``: (B, S),
    which slots hold one) in draw (slot) order, then other slots (which hold no child of it) to fill the shape."""
    position = torch.arange(slots.shape[0], device=slots.device)
    order = torch.where(is_child, position, position + slots.shape[0])  # children first, each group in slot order
    return slots[order.topk(count, dim=1, largest=False).indices]


def _chain_tail_nodes(layout: TreeLayout) -> tuple[int, int]:
    """The node range [first, last) of the chain's nodes past the tree's depth."""
    return layout.lookup_offset + layout.depth, layout.lookup_offset + layout.lookup


def _chain_tail(layout: TreeLayout, tree: TreeBuffers, probs, p_first, offered, uniforms, residual, walking):
    """The chain's steps past the tree's depth, at once. There only the chain walks, and each step tries one token
    against a fresh node's p (the previous chain node's; at the tree's depth ``p_first``): step j is taken where
    every step before it was and ``uniforms[:, depth + j] < p_j(token_j)``. So the steps taken are a prefix, and a
    row stops at its first untaken step, whose p loses that token (``try_chain_token``, as step by step), or past
    the chain's last node, with that node's p. ``offered``: (B,) rows walking on the chain at the tree's depth.
    Returns (steps taken (B,), which steps were (B, n), each row's residual (the given one where not walking))."""
    first, last = _chain_tail_nodes(layout)
    tokens, valid = tree.tokens[:, first:last], tree.valid[:, first:last]  # (B, n): the tail's tries
    # p(token) at each tail step: step 0 at the tree's depth (p_first), step j > 0 at the chain node of step j - 1
    p_token = torch.cat([p_first.gather(1, tokens[:, :1]),
                         probs[:, first:last - 1].gather(2, tokens[:, 1:, None])[..., 0]], dim=1)
    taken = valid & (uniforms[:, layout.depth:] < p_token) & offered[:, None]
    kept = taken.long().cumprod(dim=1).bool()  # a prefix: the steps before the first untaken one
    accepted = kept.sum(dim=1)  # (B,) steps taken; the row stops at step ``accepted``
    rows = torch.arange(tokens.shape[0], device=tokens.device)
    p_at_stop = torch.where((accepted == 0)[:, None], p_first, probs[rows, first + (accepted - 1).clamp(min=0)])
    stop = accepted.clamp(max=tokens.shape[1] - 1)  # the untaken step's try (unread where every step was taken)
    tried = offered & valid[rows, stop] & (accepted < tokens.shape[1])
    p_stop, _ = try_chain_token(p_at_stop, tokens[rows, stop], tried, uniforms[rows, layout.depth + stop])
    return accepted, kept, torch.where(walking[:, None], p_stop, residual)


def sample_accept(layout: TreeLayout, tree: TreeBuffers, target_scores: torch.Tensor,
                  warpers: DeviceWarpers | None = None, children_tried: int = CHILDREN_TRIED,
                  child_slots: tuple[torch.Tensor, ...] | None = None,
                  chain_tail_at_once: bool = True) -> AcceptedPaths:
    """target_scores: (B, N, V) target scores per node, processed by ``warpers`` first if given (so that compiled,
    they fuse with the walk); ``tree.draft_probs`` holds q. Device ops only. ``children_tried``: a node's first
    draws tried at most (rejection.CHILDREN_TRIED). ``child_slots``: ``child_slot_ids(layout, device)``, passed by
    the compiled walk (None: looked up here). ``chain_tail_at_once``: a chain's steps past the tree's depth walked
    at once (``_chain_tail``); False walks them one at a time, the walk's plain definition, which the test of the
    tail holds it equal to."""
    batch, _, vocab = target_scores.shape
    device = target_scores.device
    rows = torch.arange(batch, device=device)
    if warpers is not None:
        target_scores = warpers(None, target_scores.float())
    probs = torch.softmax(target_scores.float(), dim=-1)
    length = layout.path_length
    draft_uniforms = torch.rand(batch, sum(layout.widths), device=device)  # one per draft node (tried once at most)
    # drawn only beside a chain: unread uniforms would be dropped by a compiled walk, not by an eager one
    chain_uniforms = torch.rand(batch, layout.lookup, device=device) if layout.lookup else None
    node = torch.zeros(batch, dtype=torch.long, device=device)  # the draft side's node
    twin = torch.zeros_like(node)  # the chain side's node (the root, then chain nodes)
    on_draft = torch.ones(batch, dtype=torch.bool, device=device)
    on_chain = torch.full_like(on_draft, bool(layout.lookup))
    walking = torch.ones_like(on_draft)
    draft_path = torch.zeros(batch, length + 1, dtype=torch.long, device=device)
    chain_path = torch.zeros_like(draft_path)
    emitted = torch.zeros_like(draft_path)
    count = torch.zeros_like(node)  # tokens emitted = nodes kept (the root included)
    residual = torch.zeros(batch, vocab, dtype=torch.float32, device=device)  # where each row stopped
    child_slots = child_slot_ids(layout, device) if child_slots is None else child_slots
    tail = chain_tail_at_once and layout.lookup > layout.depth  # past the tree only the chain walks
    for step in range(layout.depth if tail else length + 1):
        p = probs[rows, torch.where(on_draft, node, twin)]
        taken = torch.zeros_like(walking)
        token = torch.zeros_like(node)
        if step < layout.depth:
            slots = child_slots[step]
            is_child = tree.valid[:, slots] & (tree.parents[:, slots] == node[:, None])  # (B, S), read again below
            tried = _first_children(slots, is_child, min(children_tried, slots.shape[0]))  # (B, tried)
            q = tree.draft_probs[rows, node.clamp(max=layout.num_run - 1)]  # a leaf's: unread (it has no children)
            p, token, taken = _try_children(p, q, tree.tokens.gather(1, tried), tree.parents.gather(1, tried),
                                            tree.valid.gather(1, tried), node, walking & on_draft,
                                            draft_uniforms.gather(1, tried - 1))
        if step < layout.lookup:
            chain_slot = layout.lookup_offset + step
            offered = walking & on_chain & ~taken & tree.valid[:, chain_slot]
            p, accepted = try_chain_token(p, tree.tokens[:, chain_slot], offered, chain_uniforms[:, step])
            token = torch.where(accepted, tree.tokens[:, chain_slot], token)
            taken = taken | accepted
        residual = torch.where((walking & ~taken)[:, None], p, residual)
        emitted[:, step] = token
        count = count + walking.long()
        if step == length:
            break
        # the sides that hold the accepted token move down; a side that left never comes back
        stays = torch.zeros_like(taken)
        child = node
        if step < layout.depth:
            match = is_child & (tree.tokens[:, slots] == token[:, None])  # node has not moved since is_child
            stays = taken & on_draft & match.any(dim=1)
            child = slots[match.int().argmax(dim=1)]
        chain_stays = torch.zeros_like(taken)
        if step < layout.lookup:
            chain_stays = taken & on_chain & tree.valid[:, chain_slot] & (tree.tokens[:, chain_slot] == token)
            twin = torch.where(chain_stays, chain_slot, twin)
            chain_path[:, step + 1] = torch.where(chain_stays, chain_slot, 0)
        node = torch.where(stays, child, node)
        draft_path[:, step + 1] = torch.where(stays, child, 0)
        on_draft = torch.where(taken, stays, on_draft)
        on_chain = torch.where(taken, chain_stays, on_chain)
        walking = walking & taken
    if tail:
        first, last = _chain_tail_nodes(layout)
        p = probs[rows, torch.where(on_draft, node, twin)]  # at the tree's depth: a leaf's or the chain's node
        accepted, kept, residual = _chain_tail(layout, tree, probs, p, walking & on_chain, chain_uniforms, residual,
                                               walking)
        emitted[:, layout.depth:layout.lookup] = torch.where(kept, tree.tokens[:, first:last], 0)
        chain_path[:, layout.depth + 1:] = torch.where(kept, torch.arange(first, last, device=device), 0)
        count = count + walking.long() * (1 + accepted)  # the steps taken, and the one it stopped at
        on_draft = on_draft & ~kept[:, 0]  # a chain token taken at the tree's depth: the draft's side ends there
    bonus = draw(residual)  # the bonus token, from each row's residual
    emitted.scatter_(1, (count - 1)[:, None], bonus[:, None])
    # a side that held every accepted token: the draft's where it did, else the chain's
    path = torch.where(on_draft[:, None], draft_path, chain_path)
    use_lookup = ~on_draft if layout.lookup else None
    return AcceptedPaths(path, count, emitted, path_kinds(layout, tree, path, count, use_lookup), use_lookup)
