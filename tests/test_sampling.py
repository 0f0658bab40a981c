"""Sampling through a depth-3 tree is lossless: tokens 1-4 are distributed exactly as the target's.

Design (tiny, strongly structured, brute-forceable):
  * target: 1-layer Llama, hidden 16, vocabulary 8, sampled with temperature 0.9 and top-k 3, so
    every step has exactly 3 allowed tokens and the joint law of tokens 1..4 has 81 cells,
    enumerated exactly from 1 + 8 + 64 + 512 target forwards;
  * draft: the real LongSpec draft runs (decode_step, ring buffer, cross-attention) and its logits
    are mixed with a fixed over-confident table, q(.|node) ~ softmax(2 * z(node token) / T), where
    z(v) are the target's logits after prompt + v. q is close to p at depth 1 and drifts deeper,
    so with widths [2, 2, 2] about half the samples accept a depth-3 path (4 tokens in one round)
    and most need 2-4 rounds, i.e. tokens 2..4 come from first rounds as well as from rounds after
    a cache commit; q != p everywhere, so rejections (and residual draws) are frequent;
  * max_new_tokens = 6: the first round's depth budget is 4, never cutting the depth-3 tree;
  * ROWS samples per generate() call (num_return_sequences=ROWS: generate() repeats the prompt ROWS
    times): each row of that batch draws on its own, so one call gives ROWS samples (about 12x cheaper
    per sample on 2 CPU cores than a call per sample, where the loop's Python dominates); the tree is
    never cut for the batch (tree_batch_nodes=None).

Statistics: chi-square on the marginals of tokens 2, 3 and 4 and a G-test on the joint of
tokens 1..4 (cells with expected count < 5 pooled), each at alpha = 2.5e-4 (family-wise
false-alarm rate <= 1e-3 for any random stream).

Power. For k cells and any alternative at total-variation distance delta from p, the chi-square
noncentrality is n * sum((p'-p)^2 / p) >= 4 n delta^2 (Cauchy-Schwarz), with equality for the
least favourable alternatives. Power 0.9 at alpha = 2.5e-4 needs a noncentrality of 36.1 with 7
degrees of freedom (a marginal over the 8 tokens) and 27.5 with 2, so detecting EVERY alternative
at TV 0.02 needs n = 36.1 / (4 * 0.02^2) ~ 22,600 samples (17,200 with 3 cells): 2-4 minutes of
generate() calls on 2 CPU cores, too slow for the suite: run it with
HF_LONGSPEC_SAMPLING_SAMPLES=23000 (tests/README.md records a run). With the n = 4000 of the suite the
guaranteed-detectable TV (power 0.9, worst direction) is 0.048 per marginal; alternatives aligned
with the largest cells are detected from TV ~0.02. Checked once by hand (tests/README.md): the
reference code's bug "bonus drawn from p instead of norm(max(p - q, 0))" moves the marginals of
tokens 2/3/4 by TV ~0.02/0.06/0.07 and fails with p < 1e-12; an acceptance ratio flipped to
q/p emits forbidden tokens and moves every marginal by TV > 0.1.
"""

import inspect
import os

import numpy as np
import pytest
import torch
from scipy.stats import chisquare, power_divergence
from transformers import LogitsProcessor, LogitsProcessorList

from conftest import tiny_llama
from hf_longspec import LongSpecDraftModel

VOCAB, TEMPERATURE, TOP_K, NEW_TOKENS, ALPHA = 8, 0.9, 3, 6, 2.5e-4
# HF_LONGSPEC_TEST_DEVICE=cuda runs these laws on the GPU: captured, compiled rounds (their random draws too)
DEVICE = os.environ.get("HF_LONGSPEC_TEST_DEVICE", "cpu")
# 4000 in the suite; HF_LONGSPEC_SAMPLING_SAMPLES=23000 gives power 0.9 against EVERY alternative at TV 0.02
SAMPLES = int(os.environ.get("HF_LONGSPEC_SAMPLING_SAMPLES", "4000"))
ROWS = 100  # samples per generate() call (num_return_sequences: a batch of copies of one prompt)
_DECODE_STEP = inspect.signature(LongSpecDraftModel.decode_step)


class TableMixedDraft(LongSpecDraftModel):
    """The real draft, its logits mixed with a fixed per-token table (tensor ops only)."""

    real_weight, table_weight = 0.1, 2.0

    def decode_step(self, *args, **kwargs):
        token_ids = _DECODE_STEP.bind(self, *args, **kwargs).arguments["token_ids"]
        out = super().decode_step(*args, **kwargs)
        logits = out[0].float() * self.real_weight + self.table[token_ids] * self.table_weight
        return (logits.to(out[0].dtype), *out[1:])


def _processed_probs(logits):
    scores = logits.float() / TEMPERATURE
    kth = scores.topk(TOP_K, dim=-1).values[..., -1:]
    return torch.softmax(scores.masked_fill(scores < kth, float("-inf")), dim=-1)


@torch.no_grad()
def _exact_joint(target, ids, depth=4):
    """P(token 1, ..., token `depth`) by brute force: (VOCAB,) * depth."""
    joint = _processed_probs(target(ids).logits[:, -1])[0].double()
    for known in range(1, depth):
        grid = torch.cartesian_prod(*[torch.arange(VOCAB, device=ids.device)] * known).reshape(-1, known)
        prefixes = torch.cat([ids.expand(grid.shape[0], -1), grid], dim=1)
        conditional = _processed_probs(target(prefixes).logits[:, -1]).double().reshape(*[VOCAB] * known, VOCAB)
        joint = joint[..., None] * conditional
    return joint.cpu().numpy()


def _pooled_g_test(counts, probs):
    expected = probs * counts.sum()
    small = expected < 5
    observed = np.append(counts[~small], counts[small].sum())
    expected = np.append(expected[~small], expected[small].sum())
    keep = expected > 0
    return power_divergence(observed[keep], expected[keep], lambda_="log-likelihood").pvalue


def _assert_follows(counts, joint, positions, label=""):
    """Observed counts of tokens 1-4 against their exact joint law: no forbidden token, chi-square on
    the marginals at ``positions`` and a pooled G-test on the joint, each at ALPHA."""
    samples = counts.sum()
    assert counts[joint == 0].sum() == 0, label  # never a token that top-k forbids
    for position in positions:
        others = tuple(axis for axis in range(4) if axis != position)
        marginal, observed = joint.sum(axis=others), counts.sum(axis=others)
        support = marginal > 0
        pvalue = chisquare(observed[support], marginal[support] / marginal[support].sum() * samples).pvalue
        assert pvalue > ALPHA, (label, f"token {position + 1}", pvalue, observed, marginal * samples)
    support = joint > 0
    pvalue = _pooled_g_test(counts[support], joint[support] / joint[support].sum())
    assert pvalue > ALPHA, (label, "joint of tokens 1-4", pvalue)


def _tiny_target_and_draft(widths=(2, 2, 2), prompt_seed=3):
    target = tiny_llama(vocab_size=VOCAB, hidden_size=16, layers=1, heads=2, kv_heads=1, initializer_range=0.5).to(DEVICE)
    ids = torch.randint(0, VOCAB, (1, 4), generator=torch.Generator().manual_seed(prompt_seed)).to(DEVICE)
    draft = TableMixedDraft.from_target(target, tree_widths=list(widths), tree_batch_nodes=None)
    table = target(torch.cat([ids.expand(VOCAB, -1), torch.arange(VOCAB, device=DEVICE)[:, None]], dim=1)).logits[:, -1]
    draft.register_buffer("table", table.float(), persistent=False)
    return target, draft, ids


def _count_first_four(counts, out, start, rows=slice(None)):
    """Add the tokens 1-4 of each row of ``out`` (new tokens from column ``start``) to ``counts``."""
    np.add.at(counts, tuple(out[rows, start:start + 4].T.cpu().numpy()), 1)


@torch.no_grad()
def _sample_first_four(target, draft, ids, samples, seed, **options):
    """Counts of tokens 1-4 over ``samples`` draws, num_return_sequences=ROWS per generate() call, and
    the draft's stats of each call (pooled over its rows)."""
    counts, stats = np.zeros([VOCAB] * 4), []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a tiny model: thread hand-offs cost more than they save
    try:
        torch.manual_seed(seed)
        for _ in range(samples // ROWS):
            out = target.generate(ids, assistant_model=draft, max_new_tokens=NEW_TOKENS, num_return_sequences=ROWS,
                                  do_sample=True, temperature=TEMPERATURE, top_k=TOP_K, **options)
            _count_first_four(counts, out, ids.shape[1])
            stats.append(draft.last_stats)
    finally:
        torch.set_num_threads(threads)
    return counts, stats


@torch.no_grad()
def test_sampling_through_a_depth_3_tree_is_lossless():
    target, draft, ids = _tiny_target_and_draft()
    counts, stats = _sample_first_four(target, draft, ids, SAMPLES, seed=1234)
    _assert_follows(counts, _exact_joint(target, ids), positions=(1, 2, 3))  # tokens 2, 3, 4 and the joint of 1-4
    # the test exercises what it claims: deep accepted paths and tokens produced after commits
    reached_depth_3 = sum(s.accepted_lengths[4] for s in stats)  # rounds of 3 drafted tokens + bonus, all rows
    # every row needs 2 rounds at least (the prefill gives token 1, a round at most 4): more than 2.2 per
    # row on average means many rows drew tokens 2-4 after a commit (2.4 measured)
    rounds = sum(s.rounds for s in stats)
    assert reached_depth_3 > 0.25 * SAMPLES and rounds > 2.2 * SAMPLES, (reached_depth_3, rounds)


# 3000 in the suite (power 0.9 against any alternative at TV 0.055 per marginal); the variable raises it
RERANK_SAMPLES = int(os.environ.get("HF_LONGSPEC_SAMPLING_SAMPLES", "3000"))


@torch.no_grad()
def test_sampling_with_reranked_leaves_is_lossless(monkeypatch):
    """Widths [1, 1, 3] with re-ranked leaves: the three leaves are the likeliest next draws of the three
    nodes the draft runs, tried after that node's drafted child. Tokens 1-4 follow the target's exact law,
    and rounds keep leaves above the last depth (counted by a spy on the device walk: about 0.3 a sample; on
    the CPU only, where every round runs the walk in Python: a CUDA graph replays it without the spy)."""
    from hf_longspec.generation import decoder as decoder_module

    kept_above = []

    def spied_walk(compiled):
        walk = original_walk(compiled)

        def spy(layout, tree, scores, warpers):
            paths = walk(layout, tree, scores, warpers)
            if DEVICE == "cpu":  # reading a count syncs, which graph capture forbids
                last = paths.path_nodes.gather(1, paths.accepted[:, None] - 1)
                kept_above.append(int(((last >= layout.offsets[layout.depth])
                                       & (tree.depths.gather(1, last) < layout.depth)).sum()))
            return paths
        return spy

    original_walk = decoder_module.sampled_walk
    monkeypatch.setattr(decoder_module, "sampled_walk", spied_walk)
    target, draft, ids = _tiny_target_and_draft(widths=(1, 1, 3))
    counts, stats = _sample_first_four(target, draft, ids, RERANK_SAMPLES, seed=4321, longspec_rerank_leaves=True)
    _assert_follows(counts, _exact_joint(target, ids), positions=(0, 1, 2, 3))
    assert all(s.rerank_leaves for s in stats)
    if DEVICE == "cpu":
        assert sum(kept_above) > 0.1 * RERANK_SAMPLES, sum(kept_above)


# 3000 in the suite (power 0.9 against any alternative at TV 0.055 per marginal); the variable raises it
CHAIN_SAMPLES = int(os.environ.get("HF_LONGSPEC_SAMPLING_SAMPLES", "3000"))


@torch.no_grad()
def test_sampling_through_a_tree_and_a_lookup_chain_is_lossless():
    """A 4-token lookup chain beside a depth-3 tree of one child per node: after the draft's child
    is rejected the chain's token is tried (a one-hot proposal, accepted with probability p(token)
    of what is left, else that token leaves p), and where both hold the same token the walk stands
    on both; tokens 1-4 still follow the target's exact law. The 8-token vocabulary makes the
    prompt's tokens recur, so the chain is proposed in most rounds."""
    target, draft, ids = _tiny_target_and_draft(widths=(1, 1, 1))
    counts, stats = _sample_first_four(target, draft, ids, CHAIN_SAMPLES, seed=2468, longspec_lookup_tokens=4)
    _assert_follows(counts, _exact_joint(target, ids), positions=(0, 1, 2, 3))
    kept_chain = sum(s.lookup_commits for s in stats)  # rounds that kept the chain's path, all rows
    assert kept_chain > 0.05 * CHAIN_SAMPLES, kept_chain


# 1500 per row in the suite (power 0.9 against any alternative at TV 0.078 per marginal); the variable raises it
BATCH_SAMPLES = int(os.environ.get("HF_LONGSPEC_SAMPLING_SAMPLES", "1500"))


class _Unchanged(LogitsProcessor):
    """Returns the scores as they are; not a row-wise warper LongSpec knows, so the host walks the tree."""

    def __call__(self, input_ids, scores):
        return scores


@pytest.mark.parametrize("walk", ["device", "host"])
@torch.no_grad()
def test_sampling_a_left_padded_batch_is_lossless_per_row(walk):
    """Rows of two prompts of different lengths (the shorter left-padded), alternating, sampled together:
    each row's tokens 1-4 follow its own prompt's exact target law, with every row's tree walked and
    committed on its own, on the device (temperature and top-k only) and on the host (one more
    processor it must call). A row verified with another row's logits breaks the odd rows' law."""
    target = tiny_llama(vocab_size=VOCAB, hidden_size=16, layers=1, heads=2, kv_heads=1, initializer_range=0.5)
    generator = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, VOCAB, (1, 4), generator=generator), torch.randint(0, VOCAB, (1, 3), generator=generator)]
    ids = torch.zeros(2, 4, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, 4 - prompt.shape[1]:], mask[row, 4 - prompt.shape[1]:] = prompt[0], 1
    copies = ROWS // 2
    ids, mask = ids.repeat(copies, 1), mask.repeat(copies, 1)  # rows: prompt 0, prompt 1, prompt 0, ...
    draft = TableMixedDraft.from_target(target, tree_widths=[2, 2, 2], tree_batch_nodes=None)
    table = target(torch.cat([prompts[0].expand(VOCAB, -1), torch.arange(VOCAB)[:, None]], dim=1)).logits[:, -1]
    draft.register_buffer("table", table.float(), persistent=False)
    joints = [_exact_joint(target, prompt) for prompt in prompts]

    counts = [np.zeros([VOCAB] * 4) for _ in prompts]
    extra = {"logits_processor": LogitsProcessorList([_Unchanged()])} if walk == "host" else {}
    deep_rounds = 0
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(4321)
        for _ in range(BATCH_SAMPLES // copies):
            out = target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=NEW_TOKENS,
                                  do_sample=True, temperature=TEMPERATURE, top_k=TOP_K, pad_token_id=0, **extra)
            assert draft.last_stats.host_walked == (walk == "host")
            for row in range(2):
                _count_first_four(counts[row], out, 4, rows=slice(row, None, 2))
            deep_rounds += draft.last_stats.accepted_lengths[4]
    finally:
        torch.set_num_threads(threads)

    for row, (joint, count) in enumerate(zip(joints, counts)):
        assert count.sum() == BATCH_SAMPLES // copies * copies
        _assert_follows(count, joint, positions=(0, 1, 2, 3), label=f"row {row}")
    # depth-3 paths were accepted (0.24 of the rows' draws on the host walk, measured; fewer for prompt 1,
    # which the draft's table was not made for)
    assert deep_rounds > 0.15 * 2 * BATCH_SAMPLES, deep_rounds


def _scores(*rows):
    """Target logits per node: each row's listed tokens share the mass equally, the rest get none."""
    out = torch.full((len(rows), VOCAB), -1e9)
    for node, tokens in enumerate(rows):
        out[node, list(tokens)] = 0.0
    return out


def test_the_sampling_walk_tries_the_chain_after_the_draft_and_stands_on_both_while_they_agree():
    """Hand-built trees, the host walk alone (no model):
    - root -> draft child 1 (token 3, q = 1) and the chain 2 (token 3) -> 3 (token 5): p puts all
      its mass on 3, then on 5; the draft's child is accepted, the walk stands on it and on the
      chain's node 2, and the chain's token 5 is then accepted: the kept path is the chain's;
    - the same tree with the chain holding token 4 under the root: the walk leaves the chain, and
      the chain's later node is never offered;
    - the draft's child rejected (p(its token) = 0): the chain's token t (p = 1/2) is kept half the
      time, and when it is rejected t leaves p, so t is emitted with probability 1/2, not 3/4."""
    from hf_longspec.generation.acceptance import PathVerifier
    from hf_longspec.generation.draft_tree import HostTree

    q = torch.zeros(4, VOCAB)
    q[0, 3] = 1.0
    walk = PathVerifier(do_sample=True)
    agreeing = HostTree([0, 3, 3, 5], children=[[1, 2], [], [3], []], draft_probs=q, lookup_offset=2)
    path = walk.verify(agreeing, _scores([3], [5], [5], [6]), torch.tensor([[0]]))
    assert path.accepted_nodes == [0, 2, 3] and path.tokens == [3, 5, 6]
    leaving = HostTree([0, 3, 4, 6], children=[[1, 2], [], [3], []], draft_probs=q, lookup_offset=2)
    path = walk.verify(leaving, _scores([3], [6], [6], [7]), torch.tensor([[0]]))
    assert path.accepted_nodes == [0, 1] and path.tokens == [3, 6]

    rejected = HostTree([0, 3, 5], children=[[1, 2], [], []], draft_probs=q, lookup_offset=2)
    torch.manual_seed(0)
    firsts = [walk.verify(rejected, _scores([5, 6], [0], [1]), torch.tensor([[0]])).tokens[0] for _ in range(2000)]
    assert set(firsts) == {5, 6} and abs(firsts.count(5) / 2000 - 0.5) < 0.05
