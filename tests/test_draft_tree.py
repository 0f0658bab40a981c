"""TreeDrafter without a model: a table draft whose q depends on the node's token only, so every tree
it builds can be checked against the rule it should follow (greedy: by brute force; sampled: by the
law of each node's children, which recursive rejection sampling needs to be a node's FIRST draws
without replacement from q, in order)."""

import itertools

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from hf_longspec.generation.draft_tree import TreeBuffers, TreeDrafter, TreeLayout

VOCAB = 8


class TableDraft:
    """decode_step returns log q(. | node) = table[node's token]: what TreeDrafter reads of a draft."""

    def __init__(self, table: torch.Tensor):
        self.table = table

    def decode_step(self, context, token_ids, position_ids, slot, tree_mask):
        return (self.table[token_ids],)


def _table(rows: dict[int, list[float]], vocab=VOCAB) -> torch.Tensor:
    """Log q per token: the probabilities given (zeros elsewhere), others uniform."""
    table = torch.full((vocab, vocab), 1.0 / vocab)
    for token, probs in rows.items():
        table[token] = torch.tensor(probs + [0.0] * (vocab - len(probs)))
    return torch.log(table)


def _build(table, widths, batch, do_sample, rerank=False, root=VOCAB - 1):
    layout = TreeLayout(tuple(widths), rerank_leaves=True) if rerank else TreeLayout(tuple(widths))
    tree = TreeBuffers.allocate(layout, batch, "cpu", table.shape[0], keep_probs=do_sample)
    drafter = TreeDrafter(TableDraft(table), layout, tree, do_sample=do_sample)
    drafter.build(None, torch.full((batch,), root), torch.zeros(batch, dtype=torch.long))
    return layout, tree


def _draw_law(q: list[float], draw: int) -> np.ndarray:
    """P(the draw-th draw without replacement from q is t), by enumerating the orders (draw is 1-based)."""
    law = np.zeros(len(q))
    support = [t for t, p in enumerate(q) if p > 0]
    for order in itertools.permutations(support, draw):
        prob, left = 1.0, 1.0
        for t in order:
            prob *= q[t] / left
            left -= q[t]
        law[order[-1]] += prob
    return law


def _assert_law(tokens: torch.Tensor, law: np.ndarray, label: str) -> None:
    observed = np.bincount(tokens.numpy(), minlength=len(law))
    assert observed[law == 0].sum() == 0, (label, observed)
    pvalue = chisquare(observed[law > 0], law[law > 0] / law[law > 0].sum() * len(tokens)).pvalue
    assert pvalue > 1e-4, (label, pvalue, observed, law * len(tokens))


@torch.no_grad()
def test_a_sampled_node_takes_its_first_draws_whatever_ties_the_ranking_broke():
    """Two depth-1 nodes of equal score, each with q = (.6, .1, .1, .1, .1): five children among their ten
    candidates, four of them tied at the cut. A node's j-th child must be its j-th draw without
    replacement from q. topk breaks ties by index: it gave one node its candidates 0, 1, 3 and 4, so
    that node's third and fourth children were its fourth and fifth draws."""
    q = [0.6, 0.1, 0.1, 0.1, 0.1]
    table = _table({VOCAB - 1: [0.5, 0.5], 0: q, 1: q})
    torch.manual_seed(0)
    _, tree = _build(table, (2, 5), batch=8000, do_sample=True)
    parents = tree.parents[:, 3:8]
    first = torch.ones_like(parents, dtype=torch.bool)
    first[:, 1:] = parents[:, 1:] != parents[:, :-1]
    column = torch.arange(5).expand_as(parents)
    order = column - torch.where(first, column, 0).cummax(dim=1).values  # 0 for a node's first child, ...
    for j in range(4):
        _assert_law(tree.tokens[:, 3:8][order == j], _draw_law(q, j + 1), f"child {j + 1}")


@torch.no_grad()
def test_reranked_leaves_are_the_best_children_of_every_run_node():
    """Greedy, by brute force: the leaves are the top-L (node, token) pairs by cumulative log q over every
    node the draft ran, its drafted children excluded; each sits one below its parent, its ancestors its
    parent's and itself. The run nodes are the paper's tree's."""
    generator = torch.Generator().manual_seed(1)  # leaves at depths 2, 3, 4 and 4
    vocab = 16
    table = torch.log_softmax(torch.randn(vocab, vocab, generator=generator) * 2.5, dim=-1)
    plain_layout, plain = _build(table, (2, 3, 3, 4), batch=1, do_sample=False, root=5)
    layout, tree = _build(table, (2, 3, 3, 4), batch=1, do_sample=False, rerank=True, root=5)
    run = layout.num_run
    assert torch.equal(tree.tokens[:, :run], plain.tokens[:, :run])
    assert torch.equal(tree.parents[:, :run], plain.parents[:, :run])
    tokens, parents, scores = tree.tokens[0].tolist(), tree.parents[0].tolist(), tree.scores[0].tolist()
    drafted = {(parents[n], tokens[n]) for n in range(1, run)}
    pool = sorted(((scores[p] + float(table[tokens[p], t]), p, t) for p in range(run) for t in range(vocab)
                   if (p, t) not in drafted), reverse=True)
    leaves = set(range(run, layout.num_nodes))
    assert {(parents[n], tokens[n]) for n in leaves} == {(p, t) for _, p, t in pool[: layout.widths[-1]]}
    depths = tree.depths[0].tolist()
    assert len({depths[n] for n in leaves}) > 1  # some hang above the last depth
    for n in leaves:
        assert depths[n] == depths[parents[n]] + 1
        assert abs(scores[n] - (scores[parents[n]] + float(table[tokens[parents[n]], tokens[n]]))) < 1e-5
        expected = tree.ancestors[0, parents[n]].clone()
        expected[n] = True
        assert torch.equal(tree.ancestors[0, n], expected)
    # leaves grouped by parent, in rank order: a parent's drafted children first, then its leaves
    for n in sorted(leaves)[1:]:
        assert parents[n] >= parents[n - 1]
        if parents[n] == parents[n - 1]:
            assert table[tokens[parents[n]], tokens[n]] <= table[tokens[parents[n]], tokens[n - 1]]


@torch.no_grad()
def test_sampled_reranked_leaves_are_a_nodes_next_draws():
    """The root's q = (.4, .3, .2, .1) and flat q below it: both leaves hang under the root, and they are its
    third and fourth draws without replacement (after its two drafted children), in that order."""
    q_root = [0.4, 0.3, 0.2, 0.1]
    table = _table({VOCAB - 1: q_root})
    torch.manual_seed(1)
    layout, tree = _build(table, (2, 2), batch=6000, do_sample=True, rerank=True)
    assert bool((tree.parents[:, 3:5] == 0).all()) and bool((tree.depths[:, 3:5] == 1).all())
    for node, draw in ((1, 1), (2, 2), (3, 3), (4, 4)):
        _assert_law(tree.tokens[:, node], _draw_law(q_root, draw), f"node {node}")
    assert bool(tree.valid[:, :5].all())


def test_child_slots_list_the_next_depth_then_the_leaves():
    layout = TreeLayout((2, 3, 4), rerank_leaves=True)  # root 0 | 1 2 | 3 4 5 | leaves 6 7 8 9
    assert [layout.child_slots(d) for d in range(3)] == [[1, 2, 6, 7, 8, 9], [3, 4, 5, 6, 7, 8, 9], [6, 7, 8, 9]]
    assert TreeLayout((2, 3, 4)).child_slots(0) == [1, 2]
    assert layout.with_lookup(5).rerank_leaves and layout.candidates_per_node(96) == 8
    with pytest.raises(Exception):
        layout.rerank_leaves = False  # frozen: a decoder's shape key
