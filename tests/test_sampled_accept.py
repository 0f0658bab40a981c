"""The sampled round's acceptance on the device (sampled_accept.py), with no model: hand-built trees.

Each row of one big batch is one independent round over the same small tree shape: a root, 2 draft
children, 2 grandchildren hung under them in one of three ways, and a 2-token lookup chain. The
target's law p and the draft's q are fixed tables indexed by the node's text (its path's tokens), so
a draft node and a chain node holding the same text see the same p, as in a real forward. Each row's
children are drawn without replacement from q (Gumbel-top-k), which is what makes recursive
rejection sampling exact. Then, per round:
  token 1 ~ P0;  token 2 | token 1 = x and the walk went on ~ P1[x];  token 3 | x, y and on ~ P2[x, y].
Vectorised, the device walk runs 200,000 rounds in seconds: power to see a 0.01 shift in total
variation. The host walk (PathVerifier) is held to the same law on fewer rounds, and both to the
walk's order on trees built by hand (the draft's children first, then the chain, on both sides
while they agree).
"""

from dataclasses import replace

import numpy as np
import pytest
import torch
from conftest import perturbed_pair, random_prompt
from scipy.stats import chisquare

from hf_longspec.generation.acceptance import PathVerifier
from hf_longspec.generation.draft_tree import HostTree, TreeBuffers, TreeLayout
from hf_longspec.generation.rejection import CHILDREN_TRIED
from hf_longspec.generation import sampled_accept
from hf_longspec.generation.sampled_accept import DeviceWarpers, sample_accept, sampled_walk

VOCAB, ALPHA = 6, 1e-4
LAYOUT = TreeLayout((2, 2), lookup=2)  # nodes: root 0 | depth 1: 1, 2 | depth 2: 3, 4 | chain: 5, 6
GRANDPARENTS = ((1, 1), (1, 2), (2, 2))  # how the two depth-2 nodes hang under depth 1
RERANKED = TreeLayout((2, 2), lookup=2, rerank_leaves=True)  # nodes 3, 4: leaves under any of 0, 1, 2
LEAF_PARENTS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))  # how the two leaves hang


def _law(generator, *shape):
    """Random distributions over VOCAB with two tokens forbidden in each (as top-k would)."""
    probs = torch.rand(*shape, VOCAB, generator=generator, dtype=torch.float64) + 0.05
    forbidden = torch.rand(*shape, VOCAB, generator=generator).argsort(dim=-1)[..., :2]
    return (probs.scatter(-1, forbidden, 0.0) / probs.scatter(-1, forbidden, 0.0).sum(-1, keepdim=True)).float()


def _tables(seed=0):
    g = torch.Generator().manual_seed(seed)
    p = (_law(g), _law(g, VOCAB), _law(g, VOCAB, VOCAB))  # the target's P0, P1[x], P2[x, y]
    q = (_law(g) * 0.5 + 0.5 / VOCAB, _law(g, VOCAB) * 0.5 + 0.5 / VOCAB)  # the draft's Q0, Q1[x]: full support
    # the chain's first token is the draft's likeliest (the sides often agree), its second the target's likeliest next
    chain = (int(q[0].argmax()), int(p[1][int(q[0].argmax())].argmax()))
    return p, q, chain


def _draws_without_replacement(q, count, generator):
    keys = torch.log(q) - torch.log(-torch.log(torch.rand(q.shape, generator=generator).clamp(min=1e-20)))
    return keys.topk(count, dim=-1).indices


def _random_trees(rows, seed=1, device="cpu"):
    """(TreeBuffers, target log-probs (B, N, V)) for ``rows`` independent rounds."""
    (p0, p1, p2), (q0, q1), chain = _tables()
    g = torch.Generator().manual_seed(seed)
    depth1 = _draws_without_replacement(q0.expand(rows, -1), 2, g)  # (B, 2) tokens of nodes 1, 2
    shape = torch.randint(0, len(GRANDPARENTS), (rows,), generator=g)
    parents = torch.tensor(GRANDPARENTS)[shape]  # (B, 2) parents of nodes 3, 4
    under = [_draws_without_replacement(q1[depth1[:, j]], 2, g) for j in range(2)]  # children of nodes 1, 2
    first_of_2 = parents[:, 0] == 2  # both under node 2: node 3 is its first draw
    depth2 = torch.stack([torch.where(first_of_2, under[1][:, 0], under[0][:, 0]),
                          torch.where(parents[:, 1] == 1, under[0][:, 1],
                                      torch.where(first_of_2, under[1][:, 1], under[1][:, 0]))], dim=1)
    tokens = torch.cat([torch.zeros(rows, 1, dtype=torch.long), depth1, depth2,
                        torch.tensor(chain).expand(rows, -1)], dim=1)
    all_parents = torch.cat([torch.zeros(rows, 3, dtype=torch.long), parents,
                             torch.tensor([0, 5]).expand(rows, -1)], dim=1)
    tree = TreeBuffers.allocate(LAYOUT, rows, device, VOCAB, keep_probs=True)
    tree.tokens.copy_(tokens)
    tree.parents.copy_(all_parents)
    tree.valid.fill_(True)
    tree.draft_probs.copy_(torch.stack([q0.expand(rows, -1), q1[depth1[:, 0]], q1[depth1[:, 1]]], dim=1))
    # each node's target law, by its text: the root P0, depth 1 P1[token], depth 2 P2[parent's token, token]
    first = torch.stack([tokens[:, 1], tokens[:, 2], tokens.gather(1, parents[:, :1])[:, 0],
                         tokens.gather(1, parents[:, 1:])[:, 0], tokens[:, 5], tokens[:, 5]], dim=1)
    second = torch.stack([tokens[:, 3], tokens[:, 4], tokens[:, 6]], dim=1)
    law = torch.cat([p0.expand(rows, 1, -1), p1[first[:, :2]], p2[first[:, 2:4], second[:, :2]],
                     p1[first[:, 4:5]], p2[first[:, 5:6], second[:, 2:3]]], dim=1)
    return tree, torch.log(law).to(device)


def _assert_target_law(emitted, count, label):
    """Token 1 ~ P0, token 2 | x ~ P1[x], token 3 | x, y ~ P2[x, y] (the walk went on), each at ALPHA."""
    (p0, p1, p2), _, _ = _tables()
    checks = [(np.ones(len(count), bool), p0, 0)]
    for x in range(VOCAB):
        checks.append(((count >= 2) & (emitted[:, 0] == x), p1[x], 1))
        for y in range(VOCAB):
            checks.append(((count >= 3) & (emitted[:, 0] == x) & (emitted[:, 1] == y), p2[x, y], 2))
    tested = 0
    for rows, law, position in checks:
        if rows.sum() < 300:
            continue
        observed = np.bincount(emitted[rows, position], minlength=VOCAB)
        law = law.double().numpy()
        assert observed[law == 0].sum() == 0, (label, position, "a forbidden token")
        pvalue = chisquare(observed[law > 0], law[law > 0] / law[law > 0].sum() * rows.sum()).pvalue
        assert pvalue > ALPHA, (label, position, pvalue, observed, law * rows.sum())
        tested += 1
    return tested


def test_the_device_walk_emits_the_target_law_through_tree_and_chain():
    rows = 200_000
    tree, scores = _random_trees(rows)
    torch.manual_seed(0)
    paths = sample_accept(LAYOUT, tree, scores)
    emitted, count = paths.emitted.numpy(), paths.accepted.numpy()
    tested = _assert_target_law(emitted, count, "device")
    assert tested >= 15, tested
    # it exercised what it claims: 3-token rounds, and rounds that kept the chain's path
    assert (count == 3).mean() > 0.05 and paths.lookup.float().mean() > 0.02, ((count == 3).mean(), paths.lookup.float().mean())
    # the kept nodes hold the emitted tokens, and each is its predecessor's child
    for row in range(200):
        nodes = paths.path_nodes[row, : count[row]].tolist()
        assert [tree.tokens[row, n].item() for n in nodes[1:]] == emitted[row, : count[row] - 1].tolist()
        assert all(tree.parents[row, b].item() == a for a, b in zip(nodes, nodes[1:]))


def _without_chain(layout, tree, scores):
    """The same trees and scores without the lookup chain's nodes (the last ``layout.lookup``): a sampled call's default."""
    kept, plain = layout.lookup_offset, replace(layout, lookup=0)
    bare = TreeBuffers.allocate(plain, tree.tokens.shape[0], tree.tokens.device, VOCAB, keep_probs=True)
    for name in ("tokens", "parents", "valid", "depths"):
        getattr(bare, name).copy_(getattr(tree, name)[:, :kept])
    bare.draft_probs.copy_(tree.draft_probs)
    return plain, bare, scores[:, :kept].contiguous()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("chain", [True, False])
@pytest.mark.parametrize("reranked", [False, True])
@pytest.mark.parametrize("compiled", [False, True])
def test_a_captured_walk_draws_fresh_randoms_on_every_replay(compiled, reranked, chain):
    """Captured as a CUDA graph (as the round is; compiled whole as on CUDA by default, with a chain or without),
    each replay draws new uniforms: two replays differ, and each follows the target's
    law (re-ranked leaves too)."""
    layout = RERANKED if reranked else LAYOUT
    tree, scores = (_reranked_trees if reranked else _random_trees)(200_000, device="cuda")
    if not chain:
        layout, tree, scores = _without_chain(layout, tree, scores)
    walk = sampled_walk(compiled)
    torch.manual_seed(0)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        walk(layout, tree, scores)  # warm-up (and compile), as capture wants
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        paths = walk(layout, tree, scores)
    replays = []
    for _ in range(2):
        graph.replay()
        replays.append((paths.emitted.cpu().numpy(), paths.accepted.cpu().numpy()))
    assert (replays[0][0] != replays[1][0]).any(axis=1).mean() > 0.3
    for emitted, count in replays:
        assert _assert_target_law(emitted, count, "captured") >= 15


@pytest.mark.parametrize("chain", [False, True])
def test_the_compiled_walk_is_one_graph_with_the_warpers_and_walks_as_the_eager_one(monkeypatch, chain):
    """On CUDA a sampled round compiles its walk whole (``sampled_walk(True)``), beside a lookup chain or not: one
    graph, the warpers in it, so that its few hundred small ops fuse. A graph break would leave pieces eager inside
    the captured round, and a host sync would break capture. Traced here with dynamo's aot_eager backend (inductor
    took 55 s over the shipped tree's walk on this project's 2-core CPU), the compiled wrapper walks as the eager
    walk on the same randoms."""
    from transformers.generation.logits_process import TemperatureLogitsWarper, TopKLogitsWarper

    layout, tree, scores = RERANKED, *_reranked_trees(2000)
    if not chain:
        layout, tree, scores = _without_chain(layout, tree, scores)
    warpers = DeviceWarpers((TemperatureLogitsWarper(0.8), TopKLogitsWarper(4)))
    slots = sampled_accept.child_slot_ids(layout, scores.device)
    explained = torch._dynamo.explain(sample_accept)(layout, tree, scores, warpers, CHILDREN_TRIED, slots)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    monkeypatch.setattr(sampled_accept, "_compiled_walk",
                        torch.compile(sample_accept, backend="aot_eager", fullgraph=True))
    torch.manual_seed(7)
    compiled = sampled_walk(True)(layout, tree, scores, warpers)
    torch.manual_seed(7)
    eager = sampled_walk(False)(layout, tree, scores, warpers)
    for name in ("path_nodes", "accepted", "emitted", "non_chain") + (("lookup",) if chain else ()):
        assert torch.equal(getattr(compiled, name), getattr(eager, name)), name
    assert compiled.accepted.float().mean() > 1.5  # the walk accepted children, not only bonus tokens
    if chain:
        assert compiled.lookup.any()  # rounds that kept the chain's path: the chain was walked


@pytest.mark.parametrize("widths, lookup, reranked", [((2, 3), 6, False), ((1, 1, 3), 5, True),
                                                   ((4, 16, 16, 16, 16), 32, True), ((), 4, False)])
def test_the_chain_s_steps_past_the_tree_walked_at_once_equal_the_step_by_step_walk(widths, lookup, reranked):
    """Past the tree's depth only the chain walks, and its steps are taken at once (``_chain_tail``): on the same
    randoms every row keeps the same nodes, emits the same tokens and takes the same bonus as stepping one token at
    a time, whether it stops inside the tree, at the tree's depth, in the chain (a valid token rejected, or an
    invalid one) or past its last node. The target favours the chain's tokens, so that many rows walk it deep."""
    rows, vocab = 4000, 50
    layout = TreeLayout(widths, lookup, rerank_leaves=reranked)
    g = torch.Generator().manual_seed(11)
    tree = TreeBuffers.allocate(layout, rows, "cpu", vocab, keep_probs=True)
    tree.tokens.copy_(torch.randint(0, vocab, tree.tokens.shape, generator=g))
    tree.valid.fill_(True)
    for depth in range(1, layout.depth + 1):  # each depth under the previous depth's first node
        tree.parents[:, layout.offsets[depth]:layout.offsets[depth] + widths[depth - 1]] = layout.offsets[depth - 1]
    chain = torch.arange(layout.lookup_offset, layout.num_nodes)
    tree.parents[:, chain] = torch.cat([chain.new_zeros(1), chain[:-1]])
    tree.valid[:, chain[-1]] = torch.rand(rows, generator=g) > 0.3  # some rows' last chain token is invalid
    tree.draft_probs.copy_(torch.softmax(torch.randn(tree.draft_probs.shape, generator=g), dim=-1))
    scores = torch.randn(rows, layout.num_nodes, vocab, generator=g)
    for step, node in enumerate(chain):  # the chain's token gets most of its predecessor's p
        scores[torch.arange(rows), 0 if step == 0 else node - 1, tree.tokens[:, node]] += 7.0
    torch.manual_seed(1)
    at_once = sample_accept(layout, tree, scores)
    torch.manual_seed(1)
    step_by_step = sample_accept(layout, tree, scores, chain_tail_at_once=False)
    # compiled whole, as a compiled round walks it beside a chain: one graph (a break would leave pieces eager
    # inside the captured round), walked as the eager walk on the same randoms (dynamo's aot_eager backend)
    slots = sampled_accept.child_slot_ids(layout, scores.device)
    explained = torch._dynamo.explain(sample_accept)(layout, tree, scores, None, CHILDREN_TRIED, slots)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    torch.manual_seed(1)
    compiled = torch.compile(sample_accept, backend="aot_eager")(layout, tree, scores, None, CHILDREN_TRIED, slots)
    for name in ("path_nodes", "accepted", "emitted", "non_chain", "lookup"):
        assert torch.equal(getattr(at_once, name), getattr(step_by_step, name)), name
        assert torch.equal(getattr(at_once, name), getattr(compiled, name)), name
    past_the_tree = at_once.accepted > layout.depth + 1
    assert past_the_tree.float().mean() > 0.3 and (at_once.accepted == layout.path_length + 1).any()


def test_the_host_walk_emits_the_same_law():
    rows = 12_000
    tree, scores = _random_trees(rows, seed=2)
    walk = PathVerifier(do_sample=True)
    torch.manual_seed(1)
    emitted, count = np.zeros((rows, 3), dtype=np.int64), np.zeros(rows, dtype=np.int64)
    for row in range(rows):
        path = walk.verify(tree.to_host(row, LAYOUT.lookup_offset), scores[row], torch.tensor([[0]]))
        emitted[row, : len(path.tokens)], count[row] = path.tokens, len(path.tokens)
    assert _assert_target_law(emitted, count, "host") >= 5


def _reranked_trees(rows, seed=3, device="cpu"):
    """As ``_random_trees``, with re-ranked leaves: each hangs under the root (then it is the root's third or
    fourth draw from Q0, its text one token: law P1) or under a depth-1 node (that node's first or second
    draw: law P2). A node's leaves are its draws after its drafted children, in order."""
    (p0, p1, p2), (q0, q1), chain = _tables()
    g = torch.Generator().manual_seed(seed)
    root_draws = _draws_without_replacement(q0.expand(rows, -1), 4, g)  # (B, 4): nodes 1, 2, then its leaves
    depth1 = root_draws[:, :2]
    under = [_draws_without_replacement(q1[depth1[:, j]], 2, g) for j in range(2)]
    draws = torch.stack([root_draws, torch.cat([under[0], under[0]], 1), torch.cat([under[1], under[1]], 1)], 1)
    parents = torch.tensor(LEAF_PARENTS)[torch.randint(0, len(LEAF_PARENTS), (rows,), generator=g)]  # (B, 2)
    first_draw = torch.tensor([2, 0, 0])[parents]  # the root's first two draws are its drafted children
    first_draw[:, 1] += (parents[:, 1] == parents[:, 0]).long()  # a second leaf of the same node: its next draw
    leaves = draws[torch.arange(rows)[:, None], parents, first_draw]
    tokens = torch.cat([torch.zeros(rows, 1, dtype=torch.long), depth1, leaves, torch.tensor(chain).expand(rows, -1)], 1)
    tree = TreeBuffers.allocate(RERANKED, rows, device, VOCAB, keep_probs=True)  # copy_ moves the host tensors
    tree.tokens.copy_(tokens)
    tree.parents.copy_(torch.cat([torch.zeros(rows, 3, dtype=torch.long), parents,
                                  torch.tensor([0, 5]).expand(rows, -1)], dim=1))
    tree.valid.fill_(True)
    tree.draft_probs.copy_(torch.stack([q0.expand(rows, -1), q1[depth1[:, 0]], q1[depth1[:, 1]]], dim=1))
    leaf_law = torch.where((parents == 0)[..., None], p1[leaves], p2[tokens.gather(1, parents), leaves])
    law = torch.cat([p0.expand(rows, 1, -1), p1[depth1], leaf_law, p1[tokens[:, 5:6]],
                     p2[tokens[:, 5:6], tokens[:, 6:7]]], dim=1)
    return tree, torch.log(law).to(device)


def test_the_walks_try_reranked_leaves_after_a_nodes_children_and_keep_the_law():
    """Re-ranked leaves under the root are tried after its drafted children (its later draws), leaves under a
    depth-1 node as its children: the device walk and the host walk both emit the target's law, and
    rounds keep leaves of both kinds."""
    rows = 200_000
    tree, scores = _reranked_trees(rows)
    torch.manual_seed(2)
    paths = sample_accept(RERANKED, tree, scores)
    emitted, count = paths.emitted.numpy(), paths.accepted.numpy()
    assert _assert_target_law(emitted, count, "device, re-ranked") >= 15
    last = paths.path_nodes.gather(1, paths.accepted[:, None] - 1)[:, 0]
    at_root = (last >= 3) & (last <= 4) & (paths.accepted == 2)  # a leaf one below the root
    below = (last >= 3) & (last <= 4) & (paths.accepted == 3)
    assert at_root.float().mean() > 0.02 and below.float().mean() > 0.02, (at_root.float().mean(), below.float().mean())
    for row in range(200):
        nodes = paths.path_nodes[row, : count[row]].tolist()
        assert [tree.tokens[row, n].item() for n in nodes[1:]] == emitted[row, : count[row] - 1].tolist()
        assert all(tree.parents[row, b].item() == a for a, b in zip(nodes, nodes[1:]))
    host_rows = 12_000
    walk = PathVerifier(do_sample=True)
    emitted, count = np.zeros((host_rows, 3), dtype=np.int64), np.zeros(host_rows, dtype=np.int64)
    for row in range(host_rows):
        path = walk.verify(tree.to_host(row, RERANKED.lookup_offset), scores[row], torch.tensor([[0]]))
        emitted[row, : len(path.tokens)], count[row] = path.tokens, len(path.tokens)
    assert _assert_target_law(emitted, count, "host, re-ranked") >= 5


def test_a_node_s_draws_past_the_eighth_are_not_tried_and_the_law_holds():
    """A root with 12 children, its 12 draws from q: both walks try its first CHILDREN_TRIED (8) only,
    each try being a pass over the vocabulary, and still emit the target's law (the residual covers what
    the untried draws would have). Trying all 12 accepts the 9th-12th in 5.6% of these rounds."""
    vocab, rows, width = 16, 100_000, 12
    g = torch.Generator().manual_seed(5)
    p0 = torch.rand(vocab, generator=g, dtype=torch.float64) ** 4
    p0 = (p0 / p0.sum()).float()
    q0 = torch.full((vocab,), 1.0 / vocab)
    layout = TreeLayout((width,))
    tree = TreeBuffers.allocate(layout, rows, "cpu", vocab, keep_probs=True)
    tree.tokens[:, 1:] = _draws_without_replacement(q0.expand(rows, -1), width, g)
    tree.valid.fill_(True)
    tree.draft_probs.copy_(q0.expand(rows, 1, -1))
    scores = torch.log(p0).expand(rows, width + 1, -1).contiguous()
    torch.manual_seed(3)
    paths = sample_accept(layout, tree, scores)
    assert CHILDREN_TRIED == 8
    accepted_child = torch.where(paths.accepted == 2, paths.path_nodes[:, 1], 0)
    assert int(accepted_child.max()) <= CHILDREN_TRIED and (accepted_child > 0).float().mean() > 0.5
    first = paths.emitted[:, 0].numpy()
    assert chisquare(np.bincount(first, minlength=vocab), p0.double().numpy() * rows).pvalue > ALPHA
    walk, host_rows, host_first = PathVerifier(do_sample=True), 4000, []
    for row in range(host_rows):
        path = walk.verify(tree.to_host(row), scores[row], torch.tensor([[0]]))
        assert len(path.accepted_nodes) == 1 or path.accepted_nodes[1] <= CHILDREN_TRIED
        host_first.append(path.tokens[0])
    assert chisquare(np.bincount(host_first, minlength=vocab), p0.double().numpy() * host_rows).pvalue > ALPHA


def _one_tree(tokens, parents, draft_q):
    """A one-row TreeBuffers of the test layout (a chain of 2) from hand-written nodes."""
    tree = TreeBuffers.allocate(LAYOUT, 1, "cpu", VOCAB, keep_probs=True)
    tree.tokens[0] = torch.tensor(tokens)
    tree.parents[0] = torch.tensor(parents)
    tree.valid.fill_(True)
    tree.draft_probs[0] = draft_q
    return tree


def _point_scores(*rows):
    out = torch.full((1, len(rows), VOCAB), -1e9)
    for node, tokens in enumerate(rows):
        out[0, node, list(tokens)] = 0.0
    return out


def test_the_device_walk_stands_on_both_sides_and_tries_the_chain_last():
    """root -> draft 1 (token 3), 2 (token 4); 1 -> 3 (token 0), 4 (token 1); chain 5 (token 3) -> 6 (token 5).
    - p is all on 3, then on 5: the draft's child 1 is accepted, the walk stands on it and on the
      chain's 5, and the chain's 5 is accepted next: the kept path is the chain's, 3 tokens;
    - p all on 3, then on 1: the draft's path 1 -> 4 is kept (the chain left at its second token);
    - p all on 2 at the root: nothing is accepted, the bonus is 2."""
    q = torch.zeros(3, VOCAB)
    q[:, 3], q[:, 4] = 0.5, 0.5
    q[1, :] = 0.0
    q[1, 0], q[1, 1] = 0.5, 0.5
    tree = _one_tree([0, 3, 4, 0, 1, 3, 5], [0, 0, 0, 1, 1, 0, 5], q)
    paths = sample_accept(LAYOUT, tree, _point_scores([3], [5], [5], [0], [0], [5], [2]))
    assert paths.path_nodes[0, :3].tolist() == [0, 5, 6] and paths.emitted[0].tolist() == [3, 5, 2]
    assert bool(paths.lookup[0]) and int(paths.accepted[0]) == 3
    paths = sample_accept(LAYOUT, tree, _point_scores([3], [1], [5], [0], [0], [1], [2]))
    assert paths.path_nodes[0, :3].tolist() == [0, 1, 4] and paths.emitted[0].tolist() == [3, 1, 0]
    assert not bool(paths.lookup[0])
    paths = sample_accept(LAYOUT, tree, _point_scores([2], [1], [5], [0], [0], [1], [2]))
    assert int(paths.accepted[0]) == 1 and paths.emitted[0, 0].item() == 2


def test_row_wise_warpers_run_on_the_device_and_others_do_not():
    from transformers.generation.logits_process import (
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    warpers = DeviceWarpers.from_processors([TemperatureLogitsWarper(0.7), TopKLogitsWarper(3), TopPLogitsWarper(0.9)])
    scores = torch.randn(2, 5, VOCAB)
    expected = torch.stack([TopPLogitsWarper(0.9)(None, TopKLogitsWarper(3)(None, TemperatureLogitsWarper(0.7)(None, row)))
                            for row in scores])
    assert torch.equal(warpers(None, scores), expected)  # every node at once, as row by row
    assert DeviceWarpers.from_processors([TemperatureLogitsWarper(0.7)]).key != \
        DeviceWarpers.from_processors([TemperatureLogitsWarper(0.8)]).key  # one graph per setting
    assert DeviceWarpers.from_processors([RepetitionPenaltyLogitsProcessor(1.2)]) is None
    assert DeviceWarpers.from_processors(None).processors == ()


@pytest.mark.parametrize("processor", ["none", "repetition"])
def test_generate_samples_on_the_device_only_with_row_wise_warpers(processor):
    """Sampling with temperature / top-k runs device rounds; a repetition penalty walks on the host."""
    target, draft = perturbed_pair()
    ids = random_prompt(12)
    extra = {"repetition_penalty": 1.3} if processor == "repetition" else {}
    target.generate(ids, assistant_model=draft, max_new_tokens=8, do_sample=True, temperature=0.9, top_k=20, **extra)
    assert draft.last_stats.host_walked == (processor == "repetition")


def test_a_call_with_other_warper_settings_gets_its_own_round():
    """The warpers' settings are constants of the captured round: a call with other settings must not
    reuse a round built for the last ones. Sampling with top_k=1 is greedy, so after a call at
    temperature 1.5 and top-k 50 it must give vanilla greedy's tokens exactly."""
    target, draft = perturbed_pair()
    ids = random_prompt(12)
    torch.manual_seed(0)
    target.generate(ids, assistant_model=draft, max_new_tokens=12, do_sample=True, temperature=1.5, top_k=50)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=12, do_sample=True, top_k=1)
    assert torch.equal(out, target.generate(ids, max_new_tokens=12, do_sample=False))
    assert not draft.last_stats.host_walked


def test_device_sampling_with_top_k_1_on_real_text_is_greedy_token_for_token(embedded):
    """SmolLM2 and the shipped draft on eval-split prose whose end repeats an earlier passage, sampled
    with top_k=1 (which is greedy) through the device walk and a 12-token chain: vanilla greedy's
    tokens, with draft and chain paths accepted. (No tau threshold: the prompt is each machine's own installed
    text, and the device's read 1.74 where this machine's reads more.)"""
    from hf_longspec import load_embedded_draft
    from hf_longspec.corpus import long_prompt_ids

    target, tokenizer = embedded
    draft = load_embedded_draft(target)
    text = long_prompt_ids(tokenizer, 1500, kind="prose", split="eval", seed=1)
    ids = torch.tensor([text + text[300:420]])
    reference = target.generate(ids, max_new_tokens=48, do_sample=False)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=48, do_sample=True, top_k=1,
                          longspec_lookup_tokens=12, longspec_tree_widths=draft.config.tree_widths,  # not the CPU's
                          longspec_plain_steps=False)  # every token from a round, whatever the machine's timing
    stats = draft.last_stats
    assert torch.equal(out, reference)
    # a round that kept the chain accepted a chain token, so the other rounds of two or more tokens kept a tree path
    tree_commits = sum(count for length, count in stats.accepted_lengths.items() if length > 1) - stats.lookup_commits
    assert not stats.host_walked and tree_commits > 0 and stats.lookup_commits > 0, stats.as_dict()


def test_a_sampled_call_that_asks_nothing_verifies_the_chain_and_keeps_each_row_s_law(embedded):
    """Since the forty-eighth session a sampled call verifies the draft config's lookup chain as a greedy one does
    (on this CPU its ``cpu_lookup_tokens``, with the CPU round and its plain steps): SmolLM2 and the shipped draft on
    a left-padded batch of two real prompts (eval-split code whose end repeats an earlier passage, and prose),
    sampled with top_k=1 (greedy) and nothing else asked, give each row vanilla greedy's tokens."""
    from hf_longspec import load_embedded_draft
    from hf_longspec.corpus import long_prompt_ids

    target, tokenizer = embedded
    draft = load_embedded_draft(target)
    code = long_prompt_ids(tokenizer, 900, kind="code", split="eval", seed=2)
    prompts = [code + code[200:320], long_prompt_ids(tokenizer, 700, kind="prose", split="eval", seed=3)]
    width = max(len(p) for p in prompts)
    ids = torch.tensor([[tokenizer.pad_token_id or 0] * (width - len(p)) + p for p in prompts])
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
    reference = target.generate(ids, attention_mask=mask, max_new_tokens=40, do_sample=False)
    out = target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=40, do_sample=True, top_k=1)
    stats = draft.last_stats
    assert torch.equal(out, reference)
    assert stats.lookup_tokens == draft.config.cpu_lookup_tokens > 0 and not stats.host_walked, stats.as_dict()
