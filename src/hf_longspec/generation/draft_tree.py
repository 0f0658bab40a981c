"""Static-shape draft trees: the draft proposes, depth by depth, the most likely continuations.

Depth 1 holds the top widths[0] tokens of the root; every later depth holds the global top
widths[d] (parent, token) pairs by cumulative draft log-probability (the paper's tree). Leaves
at the last depth are never run through the draft.

With ``rerank_leaves`` (EAGLE-2's re-ranking, for the leaves only) the last width's nodes are the global
top (parent, token) pairs of EVERY node the draft ran, not only of the last depth's: a likely second
guess near the root outranks an unlikely one deep down. The nodes the draft runs, and so the rows
verified, stay the same; a leaf's depth is then its parent's plus one (``TreeBuffers.depths``).

The shape is fixed by the widths: node ids are assigned depth by depth ([root | depth 1 | depth
2 | ...]), within a depth grouped by parent and best first. So every buffer is preallocated, every
step is a device op, and the whole drafting phase can be captured once as a CUDA graph. A node
whose draft probability is 0 (a token the logits processors forbid) is kept in its slot but marked
invalid: it is never accepted, and neither are its descendants.

A layout with ``lookup`` K > 0 adds K nodes after the draft's, one chain from the root holding the
prompt-lookup tokens (lookup.py); the draft never runs them. ``lookup_chains`` C > 1 hangs C such chains
from the root, one after the other (the latest match's continuation, then older guesses).

Sampling keeps this shape and stays lossless: how many children each node gets is fixed from the
deterministic top-k ranking *before* its children are drawn, and the children are then drawn
without replacement from the draft distribution q (Gumbel-top-k). Recursive rejection sampling
(acceptance.py) needs exactly that: candidates that are sequential draws from q. So a node's
children take its first draws in order (ranks 0, 1, ... whatever ties the ranking broke), and its
re-ranked leaves its next ones, after its drafted children.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import torch

from ..draft_state import DraftStepContext


@dataclass(frozen=True)
class TreeLayout:
    """Widths per depth and the node numbering they imply; ``lookup`` chain nodes come last."""

    widths: tuple[int, ...]
    lookup: int = 0
    lookup_chains: int = 1  # chains of ``lookup`` nodes each (when lookup > 0)
    rerank_leaves: bool = False  # the last width's nodes: the best children of every run node, not of the last depth

    @classmethod
    def plan(cls, widths, max_nodes: int | None, vocab_size: int) -> "TreeLayout":
        """Cut `widths` to a total of `max_nodes` drafted nodes and to what the vocabulary allows."""
        planned, budget, frontier = [], max_nodes if max_nodes is not None else float("inf"), 1
        for width in widths:
            width = int(min(width, budget, frontier * min(width, vocab_size)))
            if width <= 0:
                break
            planned.append(width)
            budget -= width
            frontier = width
        return cls(tuple(planned))

    @property
    def depth(self) -> int:
        return len(self.widths)

    @property
    def num_nodes(self) -> int:
        return 1 + sum(self.widths) + self.lookup * self.lookup_chains

    @property
    def lookup_offset(self) -> int:
        """Node id of the lookup chain's first node."""
        return 1 + sum(self.widths)

    def with_lookup(self, tokens: int, chains: int = 1) -> "TreeLayout":
        """This tree plus ``chains`` lookup chains of ``tokens`` nodes. A chain may reach deeper than the
        draft: a copied passage is often accepted whole, where the draft's acceptance decays."""
        return replace(self, lookup=int(tokens), lookup_chains=int(chains) if tokens else 1)

    @property
    def chain_offsets(self) -> tuple[int, ...]:
        """Node id of each lookup chain's first node."""
        return tuple(self.lookup_offset + chain * self.lookup for chain in range(self.lookup_chains if self.lookup else 0))

    @property
    def path_length(self) -> int:
        """Nodes after the root on the longest path a round can accept (the draft's or the chain's)."""
        return max(self.depth, self.lookup)

    @property
    def num_run(self) -> int:
        """Nodes the draft runs (all but the last depth's leaves)."""
        return 1 + sum(self.widths[:-1])

    @property
    def offsets(self) -> tuple[int, ...]:
        """First node id of each depth 0..D."""
        starts, total = [0], 1
        for width in self.widths:
            starts.append(total)
            total += width
        return tuple(starts)

    def depth_of_nodes(self) -> list[int]:
        """Each node's depth; a re-ranked leaf's is set per round (this says the last depth)."""
        return [0] + [d + 1 for d, width in enumerate(self.widths) for _ in range(width)] + \
            list(range(1, self.lookup + 1)) * self.lookup_chains

    def candidates_per_node(self, vocab_size: int) -> int:
        """Ranked children kept per run node: its drafted children, and with ``rerank_leaves`` every leaf too."""
        return min(vocab_size, max(self.widths, default=1) + (self.widths[-1] if self.rerank_leaves else 0))

    def child_slots(self, depth: int) -> list[int]:
        """Node ids that may be children of a node at ``depth`` < self.depth, in the order its draws fill them:
        the next depth's, then (re-ranked) the leaves'."""
        offsets, leaves = self.offsets, self.offsets[self.depth]
        slots = list(range(offsets[depth + 1], offsets[depth + 1] + self.widths[depth]))
        if self.rerank_leaves and depth + 1 < self.depth:
            slots += list(range(leaves, leaves + self.widths[-1]))
        return slots


@dataclass
class HostTree:
    """A drafted tree on the host, for verification that walks it in Python (processors, sampling)."""

    token_list: list[int]
    children: list[list[int]]  # valid child ids of each node, in draw (rank) order
    draft_probs: torch.Tensor | None = None  # (N_run, V) q of each run node (sampling)
    lookup_offset: int | None = None  # node id of the lookup chain's first node (None: no chain)

    def is_chain(self, node: int) -> bool:
        return self.lookup_offset is not None and node >= self.lookup_offset

    def draft_children(self, node: int) -> list[int]:
        return [child for child in self.children[node] if not self.is_chain(child)]

    def chain_child(self, node: int) -> int | None:
        """The lookup chain's node under ``node`` (the root or a chain node), if valid."""
        return next((child for child in self.children[node] if self.is_chain(child)), None)

    def children_with_token(self, node: int, token: int) -> list[int]:
        """At most a draft child and a chain child (siblings of one kind hold distinct tokens)."""
        return [child for child in self.children[node] if self.token_list[child] == token]


@dataclass
class TreeBuffers:
    """One row-batch of trees (B, N ...) and the draft's tree K/V, preallocated and reused."""

    tokens: torch.Tensor  # (B, N) long
    parents: torch.Tensor  # (B, N) long; the root is its own parent
    valid: torch.Tensor  # (B, N) bool
    scores: torch.Tensor  # (B, N) float32 cumulative log q
    ancestors: torch.Tensor  # (B, N, N) bool, ancestor-or-self
    path_tokens: torch.Tensor  # (B, N, D) long: tokens from depth 1 down to the node (processors' input)
    depths: torch.Tensor  # (B, N) long: each node's depth (a re-ranked leaf's changes per round)
    ranked_log_q: torch.Tensor  # (B, N_run, K) float32: each run node's top-K log q, best first (the ranking)
    candidates: torch.Tensor  # (B, N_run, K) long: the tokens its children take, in order (sampled: its draws)
    candidate_log_q: torch.Tensor  # (B, N_run, K) float32: their log q (sampled; greedy, they are ranked_log_q)
    draft_probs: torch.Tensor | None = field(default=None)  # (B, N_run, V) float32, sampling only

    @classmethod
    def allocate(cls, layout: TreeLayout, batch: int, device, vocab_size: int, keep_probs: bool) -> "TreeBuffers":
        n, k = layout.num_nodes, layout.candidates_per_node(vocab_size)
        return cls(
            tokens=torch.zeros(batch, n, dtype=torch.long, device=device),
            parents=torch.zeros(batch, n, dtype=torch.long, device=device),
            valid=torch.zeros(batch, n, dtype=torch.bool, device=device),
            scores=torch.zeros(batch, n, dtype=torch.float32, device=device),
            ancestors=torch.zeros(batch, n, n, dtype=torch.bool, device=device),
            path_tokens=torch.zeros(batch, n, max(layout.depth, 1), dtype=torch.long, device=device),
            depths=torch.tensor(layout.depth_of_nodes(), device=device)[None].repeat(batch, 1),
            ranked_log_q=torch.zeros(batch, layout.num_run, k, dtype=torch.float32, device=device),
            candidates=torch.zeros(batch, layout.num_run, k, dtype=torch.long, device=device),
            candidate_log_q=torch.zeros(batch, layout.num_run, k, dtype=torch.float32, device=device),
            draft_probs=(torch.zeros(batch, layout.num_run, vocab_size, dtype=torch.float32, device=device)
                         if keep_probs else None),
        )

    def to_host(self, row: int = 0, lookup_offset: int | None = None) -> HostTree:
        """One sync: the row's tree as Python lists (``lookup_offset``: where a lookup chain starts)."""
        tokens, parents, valid = (t[row].tolist() for t in (self.tokens, self.parents, self.valid))
        children: list[list[int]] = [[] for _ in tokens]
        for node in range(1, len(tokens)):
            if valid[node]:
                children[parents[node]].append(node)
        probs = self.draft_probs[row] if self.draft_probs is not None else None
        return HostTree(token_list=tokens, children=children, draft_probs=probs, lookup_offset=lookup_offset)


class TreeDrafter:
    """Fills TreeBuffers for one round from the draft's ring buffer and the target's cache."""

    def __init__(self, draft, layout: TreeLayout, buffers: TreeBuffers, logits_processor=None,
                 do_sample: bool = False):
        self.draft = draft
        self.layout = layout
        self.buffers = buffers
        self.logits_processor = logits_processor if logits_processor else None
        # row-wise warpers (sampled_accept.DeviceWarpers) need no texts; other processors read each node's
        self.row_wise = bool(getattr(self.logits_processor, "row_wise", False))
        self.do_sample = do_sample
        device = buffers.tokens.device
        self._eye = torch.eye(layout.num_nodes, dtype=torch.bool, device=device)
        if layout.lookup:  # the chains' fixed parents and ancestors: root, then each earlier node of its chain
            k = layout.lookup
            parents, ancestors = [], torch.zeros(k * layout.lookup_chains, layout.num_nodes, dtype=torch.bool,
                                                 device=device)
            ancestors[:, 0] = True
            for c, first in enumerate(layout.chain_offsets):
                chain = torch.arange(first, first + k, device=device)
                parents.append(torch.cat([chain.new_zeros(1), chain[:-1]]))
                ancestors[c * k : (c + 1) * k, first : first + k] = torch.ones(k, k, dtype=torch.bool, device=device).tril()
            self._chain_parents = torch.cat(parents)[None]
            self._chain_ancestors = ancestors[None]

    @torch.no_grad()
    def build(self, context: DraftStepContext, root_tokens: torch.Tensor, root_positions: torch.Tensor,
              sequences: list[torch.Tensor] | None = None) -> None:
        """root_tokens/root_positions: (B,) device tensors. ``sequences``: per row, the (1, L_b)
        committed ids ending with the root (rows differ in length); needed only by logits processors."""
        tree, layout = self.buffers, self.layout
        batch = root_tokens.shape[0]
        tree.tokens[:, 0] = root_tokens
        tree.parents.zero_()
        tree.valid[:, 0] = True
        tree.scores[:, 0] = 0.0
        tree.ancestors.zero_()
        tree.ancestors[:, 0, 0] = True
        offsets, run = layout.offsets, layout.num_run
        history = None
        if self.logits_processor is not None and not self.row_wise:  # each row's ids, cut to the shortest row's
            shortest = min(sequence.shape[1] for sequence in sequences)
            history = torch.cat([sequence[:, sequence.shape[1] - shortest:] for sequence in sequences])  # (B, m)
        for depth, width in enumerate(layout.widths, start=1):
            start, count = offsets[depth - 1], (1 if depth == 1 else layout.widths[depth - 2])
            frontier = slice(start, start + count)
            positions = (root_positions[:, None] + (depth - 1)).expand(batch, count)
            logits = self.draft.decode_step(
                context=context,
                token_ids=tree.tokens[:, frontier],
                position_ids=positions,
                slot=start,
                tree_mask=tree.ancestors[:, frontier, :run],
            )[0]
            log_q = self._log_probs(logits, history, tree.path_tokens[:, frontier, : depth - 1])
            if tree.draft_probs is not None:
                tree.draft_probs[:, frontier] = log_q.exp()
            self._rank_candidates(log_q, frontier)
            if layout.rerank_leaves and depth == layout.depth:  # the leaves: any run node's next candidates
                pool, taken = slice(0, run), self._children_per_node()
            else:
                pool, taken = frontier, None
            parent, child_tokens, child_log_q = self._choose_children(pool, taken, width)
            self._add_nodes(slice(offsets[depth], offsets[depth] + width), parent, child_tokens, child_log_q)

    def _add_nodes(self, new: slice, parent: torch.Tensor, tokens: torch.Tensor, log_q: torch.Tensor) -> None:
        """Write nodes ``new`` under ``parent`` (B, W) node ids: tokens, scores, validity, depth, ancestors, paths."""
        tree, batch, width = self.buffers, parent.shape[0], parent.shape[1]
        tree.tokens[:, new] = tokens
        tree.parents[:, new] = parent
        tree.scores[:, new] = tree.scores.gather(1, parent) + log_q
        tree.valid[:, new] = tree.valid.gather(1, parent) & torch.isfinite(log_q)
        depth = tree.depths.gather(1, parent) + 1
        tree.depths[:, new] = depth
        tree.ancestors[:, new] = tree.ancestors.gather(
            1, parent[..., None].expand(batch, width, self.layout.num_nodes)) | self._eye[new]
        paths = tree.path_tokens.gather(1, parent[..., None].expand(batch, width, tree.path_tokens.shape[2]))
        tree.path_tokens[:, new] = paths.scatter(2, (depth - 1)[..., None], tokens[..., None])

    def attach_lookup(self, tokens: torch.Tensor, valid: torch.Tensor) -> None:
        """Write the (B, C * K) lookup chains into their nodes (after ``build``); invalid ones are never accepted."""
        tree, chain = self.buffers, slice(self.layout.lookup_offset, self.layout.num_nodes)
        tree.tokens[:, chain] = tokens
        tree.parents[:, chain] = self._chain_parents
        tree.valid[:, chain] = valid
        tree.scores[:, chain] = 0.0
        tree.ancestors[:, chain] = self._chain_ancestors

    def _log_probs(self, logits: torch.Tensor, history, path_tokens) -> torch.Tensor:
        """Log q per frontier node (B, n, V), after the logits processors the target's scores get.

        One processor call per frontier column, on a (B, ...) batch in row order, since processors may
        keep state per batch position. Rows have committed different lengths, so each row's history is
        cut to the shortest row's: exact for one row, an approximation of the target's processing for
        several, which is fine for a draft (verification is exact whatever q is). Row-wise warpers
        (sampled_accept.DeviceWarpers) read no text: one call for every node."""
        scores = logits.float()
        if self.logits_processor is not None and self.row_wise:
            scores = self.logits_processor(None, scores)
        elif self.logits_processor is not None:
            scores = torch.stack([
                self.logits_processor(torch.cat([history, path_tokens[:, column]], dim=1), scores[:, column])
                for column in range(scores.shape[1])], dim=1)
        return torch.log_softmax(scores, dim=-1)

    def _rank_candidates(self, log_q: torch.Tensor, frontier: slice) -> None:
        """Each frontier node's top-K log q (the deterministic ranking) and the tokens its children will take:
        greedy, the top-K themselves; sampled, its first K draws without replacement from q (Gumbel-top-k)."""
        tree = self.buffers
        ranked, tokens = log_q.topk(tree.candidates.shape[2], dim=-1)
        tree.ranked_log_q[:, frontier] = ranked
        if self.do_sample:
            uniform = torch.rand_like(log_q).clamp_(min=1e-20)
            tokens = (log_q - torch.log(-torch.log(uniform))).topk(tokens.shape[2], dim=-1).indices
            tree.candidate_log_q[:, frontier] = log_q.gather(2, tokens)
        tree.candidates[:, frontier] = tokens

    def _children_per_node(self) -> torch.Tensor:
        """(B, N_run) long: how many drafted children each run node has (they took its first candidates)."""
        tree, run = self.buffers, self.layout.num_run
        counts = torch.zeros_like(tree.parents[:, :run])
        return counts.scatter_add_(1, tree.parents[:, 1:run], torch.ones_like(tree.parents[:, 1:run]))

    def _choose_children(self, pool: slice, taken: torch.Tensor | None, width: int):
        """The best ``width`` (parent, candidate) pairs among the ``pool`` nodes' candidates (past the ``taken``
        (B, n) first ones of each) by cumulative log q: (parent node id, token, log q), each (B, width),
        grouped by parent, best first.

        Each parent's children are its next candidates IN ORDER, whatever ties the ranking broke (topk
        among equal scores may pick a parent's third candidate and not its second): sampled, the
        candidates are draws, and recursive rejection needs a parent's first draws, not any of them."""
        tree = self.buffers
        ranked = tree.ranked_log_q[:, pool]
        k = ranked.shape[2]
        candidate = tree.scores[:, pool, None] + ranked
        if taken is not None:
            candidate = candidate.masked_fill(torch.arange(k, device=ranked.device) < taken[..., None], float("-inf"))
        picked = candidate.flatten(1).topk(width, dim=-1).indices  # (B, width)
        parent_local = picked.sort(dim=-1).values // k  # parent-major
        earlier_parents = (parent_local[:, None, :] < parent_local[:, :, None]).sum(dim=2)  # the picks before its group
        rank = torch.arange(width, device=picked.device) - earlier_parents  # 0, 1, ... within each parent
        if taken is not None:
            rank = rank + taken.gather(1, parent_local)
        flat = parent_local * k + rank.clamp(max=k - 1)
        drawn_log_q = tree.candidate_log_q if self.do_sample else tree.ranked_log_q  # greedy: the ranked ones
        child_log_q = drawn_log_q[:, pool].flatten(1).gather(1, flat)
        child_log_q = child_log_q.masked_fill(rank >= k, float("-inf"))  # past a parent's last candidate: invalid
        return pool.start + parent_local, tree.candidates[:, pool].flatten(1).gather(1, flat), child_log_q
