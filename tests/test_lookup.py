"""The prompt-lookup chain beside the draft's tree (``longspec_lookup_tokens``): the device-side
search, greedy exactness when rounds keep the chain's path (tiny targets, batches, the real target
on real text, processors and returned scores on the host), the returned cache, the draft config's
default and clear refusals. Sampling through the chain: tests/test_sampling.py."""

import pytest
import torch

from conftest import load_script, random_prompt, tiny_llama
from hf_longspec import LongSpecDraftModel, UnsupportedGenerationError
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.generation.draft_tree import TreeLayout
from hf_longspec.generation.lookup import PromptLookup


def _lookup(history_rows, chain=3):
    lookup = PromptLookup(len(history_rows), 32, chain, "cpu")
    width = max(len(r) for r in history_rows)
    ids = torch.tensor([[0] * (width - len(r)) + r for r in history_rows])
    lookup.start(ids, [width - len(r) for r in history_rows])
    return lookup


def test_lookup_proposes_what_followed_the_latest_longest_match():
    # row 0, context ... 9 2 + root 3: the 2-gram "2 3" recurs at 1 and 5, but the 3-gram "9 2 3"
    # recurs too (at 4) and the longest wins: what followed it, "7 8 9"
    lookup = _lookup([[1, 2, 3, 4, 9, 2, 3, 7, 8, 9, 2], [5, 6, 7, 8]])
    lengths = torch.tensor([11, 4])
    tokens, valid = lookup.propose(lengths, torch.tensor([3, 6]))
    assert tokens[0].tolist() == [7, 8, 9] and valid[0].tolist() == [True, True, True]
    # row 1: context 5 6 7 8 6: only the 1-gram "6" recurs (at 1): "7 8 6", the last one the root itself
    assert tokens[1].tolist() == [7, 8, 6] and valid[1].tolist() == [True, True, True]
    # the longest recurring suffix wins over a later match of a shorter one: "1 2 3" (at 0) gives 8,
    # where "2 3" and "3" recur later (at 5, 6) and would give 9
    longest = _lookup([[1, 2, 3, 8, 4, 2, 3, 9, 1, 2]])
    tokens, valid = longest.propose(torch.tensor([10]), torch.tensor([3]))
    assert tokens[0].tolist() == [8, 4, 2] and valid[0].all()
    # of two matches of one suffix the latest wins: "1 2" at 0 and 3 gives "6 1 2", not "5 1 2"
    latest = _lookup([[1, 2, 5, 1, 2, 6, 1]])
    tokens, valid = latest.propose(torch.tensor([7]), torch.tensor([2]))
    assert tokens[0].tolist() == [6, 1, 2] and valid[0].all()
    # nothing recurs: no valid chain token
    fresh = _lookup([[1, 2, 3]])
    _, valid = fresh.propose(torch.tensor([3]), torch.tensor([4]))
    assert not valid.any()
    # a match near the end: where the copy reaches the context's end it repeats itself (period 3 here)
    short = _lookup([[4, 5, 6, 4]], chain=5)
    tokens, valid = short.propose(torch.tensor([4]), torch.tensor([5]))  # context 4 5 6 4 5: "4 5" at 0
    assert tokens[0].tolist() == [6, 4, 5, 6, 4] and valid[0].all()
    run = _lookup([[7, 3, 3, 3]], chain=5)  # context 7 3 3 3 3: "3 3 3" at 1, then a run of 3s
    tokens, valid = run.propose(torch.tensor([4]), torch.tensor([3]))
    assert tokens[0].tolist() == [3] * 5 and valid[0].all()
    # committed tokens join the history (skipped entries leave it as it was)
    short.commit(torch.tensor([[5, 9, 9]]), torch.tensor([[4, 5, 6]]), torch.tensor([[True, True, False]]))
    assert short.history[0, :7].tolist() == [4, 5, 6, 4, 5, 9, -1]


def test_a_second_chain_guesses_the_latest_match_with_another_next_token():
    """PromptLookup(chains=2): the second chain continues the latest match (longest suffix first) whose next
    token differs from the first chain's, repeated with its own period; none where every match agrees. The
    replay of benchmarks/lookup_tau.py (plain Python) gives the same second chain on random contexts."""
    lookup = load_script("benchmarks/lookup_tau.py")
    two = PromptLookup(1, 32, 3, "cpu", chains=2)
    # context 1 2 3 7 8 1 2 3 9 1 2 + root 3: "1 2 3" at 5 gives 9 1 2; at 0 it gave 7 8 1
    two.start(torch.tensor([[1, 2, 3, 7, 8, 1, 2, 3, 9, 1, 2]]), [0])
    tokens, valid = two.propose(torch.tensor([11]), torch.tensor([3]))
    assert tokens[0].tolist() == [9, 1, 2, 7, 8, 1] and valid[0].all()
    # every match of "4 5" and of "5" continues with 6: no second guess
    two.start(torch.tensor([[4, 5, 6, 4, 5, 6, 4]]), [0])
    tokens, valid = two.propose(torch.tensor([7]), torch.tensor([5]))
    assert tokens[0, :3].tolist() == [6, 4, 5] and valid[0].tolist() == [True] * 3 + [False] * 3
    # nothing recurs: neither chain
    two.start(torch.tensor([[1, 2, 3]]), [0])
    assert not two.propose(torch.tensor([3]), torch.tensor([4]))[1].any()
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        context = torch.randint(0, 4, (int(torch.randint(2, 24, (1,), generator=generator)),), generator=generator).tolist()
        probe = PromptLookup(1, 32, 5, "cpu", chains=2)
        probe.start(torch.tensor([context[:-1]]), [0])
        tokens, valid = probe.propose(torch.tensor([len(context) - 1]), torch.tensor([context[-1]]))
        first, second = tokens[0, :5][valid[0, :5]].tolist(), tokens[0, 5:][valid[0, 5:]].tolist()
        assert first == lookup.lookup_chain(context, 5), context
        assert second == (lookup.second_chain(context, first, 5) if first else []), context


def test_layout_puts_the_chain_after_the_drafted_nodes():
    two = TreeLayout.plan((2, 3, 3), None, 100).with_lookup(3, chains=2)
    assert two.num_nodes == 1 + 8 + 6 and two.chain_offsets == (9, 12) and two.depth_of_nodes()[-6:] == [1, 2, 3] * 2
    assert TreeLayout.plan((2, 3), None, 100).with_lookup(0, chains=2).lookup_chains == 1  # no chain, no chains
    # each chain hangs from the root: its first node's parent is the root, and it sees only its own chain
    from hf_longspec.generation.draft_tree import TreeBuffers, TreeDrafter

    buffers = TreeBuffers.allocate(two, 1, "cpu", 100, keep_probs=False)
    TreeDrafter(None, two, buffers).attach_lookup(torch.arange(6)[None], torch.ones(1, 6, dtype=torch.bool))
    assert buffers.parents[0, 9:].tolist() == [0, 9, 10, 0, 12, 13]
    assert [buffers.ancestors[0, node].nonzero().flatten().tolist() for node in (11, 12, 14)] == \
        [[0, 9, 10, 11], [0, 12], [0, 12, 13, 14]]
    layout = TreeLayout.plan((2, 3, 3), None, 100).with_lookup(3)
    assert layout.lookup == 3 and layout.num_nodes == 1 + 8 + 3 and layout.path_length == 3 and layout.num_run == 1 + 5
    assert layout.depth_of_nodes()[-3:] == [1, 2, 3] and layout.lookup_offset == 9
    assert TreeLayout.plan((2, 3), None, 100).with_lookup(0).num_nodes == 6
    # a chain deeper than the draft's tree: the longest acceptable path is the chain's
    deep = TreeLayout.plan((2, 3), None, 100).with_lookup(7)
    assert deep.depth_of_nodes()[-7:] == list(range(1, 8)) and deep.path_length == 7 and deep.num_nodes == 13


def _repeating_prompt(seed=1):
    """A random prompt whose second half repeats its first."""
    half = random_prompt(24, seed=seed)
    return torch.cat([half, half], dim=1)


def perturbed_pair(widths):
    """A tiny target whose greedy output settles into runs of one token after a varied start (small
    init), so the lookup chain is accepted there, and a perturbed random draft, which mostly is not."""
    target = tiny_llama(initializer_range=0.02)
    draft = LongSpecDraftModel.from_target(target, sliding_window=16, tree_widths=list(widths))
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return target, draft


@pytest.mark.parametrize(("mode", "cache_implementation"), [
    ("hybrid", None), ("masked", None), ("hybrid", "static")])
def test_greedy_with_a_lookup_chain_matches_vanilla(mode, cache_implementation):
    target, draft = perturbed_pair((2, 3, 3))
    ids = _repeating_prompt()
    kwargs = dict(max_new_tokens=40, do_sample=False, cache_implementation=cache_implementation)
    reference = target.generate(ids, **kwargs)
    out = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=3, longspec_verify_attention=mode, **kwargs)
    assert torch.equal(out, reference)
    with_lookup = draft.last_stats
    assert with_lookup.lookup_commits > 0 and with_lookup.lookup_commits <= with_lookup.non_chain_commits
    target.generate(ids, assistant_model=draft, longspec_verify_attention=mode, **kwargs)
    assert draft.last_stats.lookup_commits == 0 and with_lookup.tau > draft.last_stats.tau


@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_a_chain_deeper_than_the_tree_commits_paths_longer_than_the_tree(cache_implementation):
    """Depth-3 tree, 8-token chain: rounds that keep the chain emit up to 9 tokens, still vanilla's."""
    target, draft = perturbed_pair((2, 3, 3))
    ids = _repeating_prompt()
    kwargs = dict(max_new_tokens=48, do_sample=False, cache_implementation=cache_implementation)
    out = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=8, **kwargs)
    assert torch.equal(out, target.generate(ids, **kwargs))
    longest = max(n for n, count in draft.last_stats.accepted_lengths.items() if count)
    assert draft.last_stats.lookup_commits > 0 and longest > 3 + 1


def test_returned_cache_equals_vanillas_after_lookup_commits():
    target, draft = perturbed_pair((2, 3, 3))
    ids = _repeating_prompt(seed=2)
    kwargs = dict(max_new_tokens=30, do_sample=False, return_dict_in_generate=True)
    vanilla = target.generate(ids, **kwargs)
    out = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=6, **kwargs)
    assert torch.equal(out.sequences, vanilla.sequences) and draft.last_stats.lookup_commits > 0
    mine, theirs = (o.cache if "cache" in o else o.past_key_values for o in (out, vanilla))
    length = vanilla.sequences.shape[1] - 1
    for a, b in zip(mine.layers, theirs.layers):
        assert torch.allclose(a.keys[:, :, :length], b.keys[:, :, :length], atol=1e-5)
        assert torch.allclose(a.values[:, :, :length], b.values[:, :, :length], atol=1e-5)


def test_batched_rows_each_look_up_their_own_text():
    """Left-padded rows of different lengths: each row's history starts at its first real token."""
    target, draft = perturbed_pair((2, 3, 3))
    rows = [_repeating_prompt(seed=s)[:, cut:] for s, cut in ((3, 0), (4, 6), (5, 3))]
    width = max(r.shape[1] for r in rows)
    ids = torch.cat([torch.cat([torch.zeros(1, width - r.shape[1], dtype=torch.long), r], dim=1) for r in rows])
    mask = torch.cat([torch.cat([torch.zeros(1, width - r.shape[1], dtype=torch.long), torch.ones_like(r)], dim=1)
                      for r in rows])
    kwargs = dict(attention_mask=mask, max_new_tokens=24, do_sample=False, pad_token_id=0)
    reference = target.generate(ids, **kwargs)
    out = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=3, **kwargs)
    assert torch.equal(out, reference) and draft.last_stats.lookup_commits > 0


@pytest.mark.parametrize("chain", [5, 12])
def test_real_target_copies_a_repeated_real_passage_through_the_chain(embedded, chain):
    """SmolLM2 on local source text whose last 200 tokens repeat an earlier passage: the target
    copies it, the untrained draft cannot, the chain does (12 tokens: deeper than the 5-deep tree);
    output identical to vanilla."""
    target, tokenizer = embedded
    text = long_prompt_ids(tokenizer, 1200, kind="code", seed=3)
    ids = torch.tensor([text + text[300:500]])
    draft = LongSpecDraftModel.from_target(target).eval()
    reference = target.generate(ids, max_new_tokens=32, do_sample=False)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=32, do_sample=False, longspec_lookup_tokens=chain)
    assert torch.equal(out, reference)
    assert draft.last_stats.lookup_commits > 0 and draft.last_stats.tau > 2
    longest = max(n for n, count in draft.last_stats.accepted_lengths.items() if count)
    assert longest <= chain + 1 and (chain <= 5 or longest > 5 + 1)


def test_the_chain_length_can_come_from_a_generation_config():
    from transformers import GenerationConfig

    target, draft = perturbed_pair((2, 3, 3))
    ids = _repeating_prompt()
    config = GenerationConfig(max_new_tokens=30, do_sample=False, longspec_lookup_tokens=3)
    out = target.generate(ids, assistant_model=draft, generation_config=config)
    assert torch.equal(out, target.generate(ids, max_new_tokens=30, do_sample=False))
    assert draft.last_stats.lookup_commits > 0


def test_the_draft_configs_default_chain_is_cut_to_the_node_budget_and_can_be_turned_off():
    """lookup_tokens=8 in the draft config: greedy rounds verify the 8-node tree plus the chain, cut to
    what longspec_max_nodes leaves (two chains share it); an explicit 0 (call or generation config) turns it off. Sampled
    rounds verify the same default chain (since the forty-eighth session), and 0 turns it off there too."""
    from transformers import GenerationConfig

    target, draft = perturbed_pair((2, 3, 3))
    draft.config.lookup_tokens = 8
    ids = _repeating_prompt()
    kwargs = dict(max_new_tokens=30, do_sample=False)
    reference = target.generate(ids, **kwargs)

    def nodes_per_round(**options):
        out = target.generate(ids, assistant_model=draft, **kwargs, **options)
        assert torch.equal(out, reference)
        return draft.last_stats.drafted_nodes // draft.last_stats.rounds, draft.last_stats.lookup_commits

    nodes, commits = nodes_per_round()
    assert nodes == 8 + 8 and commits > 0
    assert nodes_per_round(longspec_max_nodes=12)[0] == 12
    assert draft.last_stats.tree_widths == (2, 3, 3) and draft.last_stats.lookup_tokens == 4  # the chain cut, not the tree
    assert nodes_per_round(longspec_max_nodes=8)[0] == 8
    assert nodes_per_round(longspec_lookup_tokens=0) == (8, 0)
    assert nodes_per_round(longspec_lookup_tokens=3)[0] == 8 + 3
    # two chains share what the budget leaves (12 - 8 = 2 each), and keep their length when it is asked for
    assert nodes_per_round(longspec_max_nodes=12, longspec_lookup_chains=2)[0] == 8 + 2 * 2
    assert nodes_per_round(longspec_lookup_chains=2)[0] == 8 + 2 * 8
    assert nodes_per_round(longspec_lookup_tokens=3, longspec_lookup_chains=2)[0] == 8 + 2 * 3
    config = GenerationConfig(**kwargs, longspec_lookup_tokens=0)
    out = target.generate(ids, assistant_model=draft, generation_config=config)
    assert torch.equal(out, reference) and draft.last_stats.lookup_commits == 0
    torch.manual_seed(0)
    target.generate(ids, assistant_model=draft, max_new_tokens=8, do_sample=True)  # sampled: the default chain too
    assert draft.last_stats.drafted_nodes // draft.last_stats.rounds == 8 + 8
    target.generate(ids, assistant_model=draft, max_new_tokens=8, do_sample=True, longspec_lookup_tokens=0)
    assert draft.last_stats.drafted_nodes // draft.last_stats.rounds == 8  # turned off


def test_greedy_accept_takes_a_second_chain_only_where_it_accepts_more():
    """Two chains of 2 from the root beside a depth-1 tree (nodes: root 0, draft 1-2, chain 3-4, chain 5-6):
    the round keeps the second chain's path where only it holds the target's tokens, and the first chain's
    where both hold them (the earlier chain on a tie)."""
    from hf_longspec.generation.acceptance import greedy_accept
    from hf_longspec.generation.draft_tree import TreeBuffers

    layout = TreeLayout((2,), lookup=2, lookup_chains=2)
    tree = TreeBuffers.allocate(layout, 1, "cpu", 10, keep_probs=False)
    tree.parents[0] = torch.tensor([0, 0, 0, 0, 3, 0, 5])
    tree.valid[0] = True

    def accept(tokens, argmax):
        tree.tokens[0] = torch.tensor(tokens)
        logits = torch.zeros(1, layout.num_nodes, 10)
        logits[0, torch.arange(layout.num_nodes), torch.tensor(argmax)] = 1.0
        paths = greedy_accept(layout, tree, logits)
        count = int(paths.accepted[0])
        return paths.path_nodes[0, :count].tolist(), paths.emitted[0, :count].tolist(), bool(paths.lookup[0])

    # the target writes 5 6, then 8: only the second chain holds it
    assert accept([9, 1, 2, 3, 4, 5, 6], [5, 0, 0, 0, 0, 6, 8]) == ([0, 5, 6], [5, 6, 8], True)
    # both chains hold 3 4: the first chain's nodes
    assert accept([9, 1, 2, 3, 4, 3, 4], [3, 0, 0, 4, 7, 4, 7]) == ([0, 3, 4], [3, 4, 7], True)
    # the second chain holds one token, the draft's child too: the draft's on a tie
    assert accept([9, 5, 2, 3, 4, 5, 6], [5, 2, 0, 0, 0, 1, 0]) == ([0, 1], [5, 2], False)


@pytest.mark.parametrize(("mode", "cache_implementation"), [
    ("hybrid", None), ("masked", None), ("hybrid", "static")])
def test_greedy_with_two_lookup_chains_matches_vanilla(mode, cache_implementation):
    """longspec_lookup_chains=2 (a second guess beside the chain): the output is vanilla's, and the round
    verifies both chains (more nodes than with one)."""
    target, draft = perturbed_pair((2, 3, 3))
    ids = _repeating_prompt()
    kwargs = dict(max_new_tokens=40, do_sample=False, cache_implementation=cache_implementation)
    reference = target.generate(ids, **kwargs)
    options = dict(longspec_lookup_tokens=3, longspec_verify_attention=mode, **kwargs)
    target.generate(ids, assistant_model=draft, **options)
    one = draft.last_stats.drafted_nodes // draft.last_stats.rounds
    assert torch.equal(target.generate(ids, assistant_model=draft, longspec_lookup_chains=2, **options), reference)
    assert draft.last_stats.lookup_commits > 0 and draft.last_stats.drafted_nodes // draft.last_stats.rounds == one + 3


def test_two_lookup_chains_are_refused_by_name_unless_greedy_and_one_or_two():
    from transformers import GenerationConfig

    target, draft = perturbed_pair((2, 3, 3))
    ids = _repeating_prompt()
    for bad in (0, 3, True, "2", 1.0):
        with pytest.raises(UnsupportedGenerationError, match=r"^longspec_lookup_chains=.*; allowed: an int from 1 to 2"):
            target.generate(ids, assistant_model=draft, max_new_tokens=4, longspec_lookup_tokens=3, longspec_lookup_chains=bad)
    with pytest.raises(UnsupportedGenerationError, match=r"^generation_config.longspec_lookup_chains=5"):
        target.generate(ids, assistant_model=draft, generation_config=GenerationConfig(max_new_tokens=4, longspec_lookup_chains=5))
    with pytest.raises(UnsupportedGenerationError, match=r"longspec_lookup_chains=2 with do_sample=True; allowed: 1 when sampling"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, do_sample=True, longspec_lookup_tokens=3,
                        longspec_lookup_chains=2)
    assert draft.last_stats is None and not draft.__dict__.get("_longspec_decoders")


def test_the_host_walk_keeps_the_longer_of_the_drafts_and_the_chains_paths():
    """Root -> draft children 1 (token 3), 2 (token 4); the chain 3 (token 3) -> 4 (token 5). The
    target's argmax is 3 at the root: both node 1 and node 3 hold it; the longer path wins, the
    draft's on a tie."""
    from hf_longspec.generation.acceptance import PathVerifier
    from hf_longspec.generation.draft_tree import HostTree

    tree = HostTree(token_list=[9, 3, 4, 3, 5], children=[[1, 2, 3], [], [], [4], []], lookup_offset=3)

    def logits(*argmax):
        out = torch.zeros(len(argmax), 10)
        out[torch.arange(len(argmax)), torch.tensor(argmax)] = 1.0
        return out

    root = torch.tensor([[9]])
    path = PathVerifier().verify(tree, logits(3, 6, 0, 5, 7), root)  # chain: 3 5 7 against the draft's 3 6
    assert path.accepted_nodes == [0, 3, 4] and path.tokens == [3, 5, 7]
    path = PathVerifier().verify(tree, logits(3, 6, 0, 2, 7), root)  # chain: 3 2, as long as the draft's 3 6
    assert path.accepted_nodes == [0, 1] and path.tokens == [3, 6]


@pytest.mark.parametrize("chains", [1, 2])
def test_host_walked_greedy_rounds_keep_the_chain_with_processors_and_returned_scores(chains):
    """Processors and returned scores walk the tree on the host: the chain is walked there too (the
    longer of the draft's and the chain's paths), with vanilla's tokens, scores and logits; two chains too."""
    target, draft = perturbed_pair((2, 3, 3))
    ids = _repeating_prompt()
    kwargs = dict(max_new_tokens=36, do_sample=False, no_repeat_ngram_size=6)
    out = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=6, longspec_lookup_chains=chains, **kwargs)
    assert torch.equal(out, target.generate(ids, **kwargs)) and draft.last_stats.lookup_commits > 0
    kwargs = dict(max_new_tokens=30, do_sample=False, return_dict_in_generate=True, output_scores=True,
                  output_logits=True)
    reference = target.generate(ids, **kwargs)
    out = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=6, longspec_lookup_chains=chains, **kwargs)
    assert torch.equal(out.sequences, reference.sequences) and draft.last_stats.lookup_commits > 0
    longest = max(n for n, count in draft.last_stats.accepted_lengths.items() if count)
    assert longest > 3 + 1  # a host-walked path longer than the draft's tree
    assert len(out.scores) == len(reference.scores) == 30
    for mine, theirs in zip(out.scores + out.logits, reference.scores + reference.logits):
        assert torch.allclose(mine, theirs, atol=1e-4)


def test_the_shipped_draft_verifies_a_32_token_chain_by_default(embedded):
    """Its config also names the CPU round (cpu_tree_widths, cpu_lookup_tokens) that every trained draft gets."""
    from hf_longspec.embedded import load_embedded_draft
    from hf_longspec.generation.tree_budget import TRAINED_DRAFT_CPU_LOOKUP_TOKENS, TRAINED_DRAFT_CPU_TREE_WIDTHS

    config = load_embedded_draft(embedded[0]).config
    assert config.lookup_tokens == 32
    assert (config.cpu_tree_widths, config.cpu_lookup_tokens) == ([1, 1, 1], 16)
    assert (tuple(config.cpu_tree_widths), config.cpu_lookup_tokens) == (TRAINED_DRAFT_CPU_TREE_WIDTHS,
                                                                         TRAINED_DRAFT_CPU_LOOKUP_TOKENS)


def test_lookup_refusals_name_what_is_allowed():
    target, draft = perturbed_pair((2, 3, 3))
    ids = random_prompt()
    from hf_longspec import LongSpecDraftConfig

    for bad in (-1, 33, True, "3"):
        with pytest.raises(ValueError, match=r"lookup_tokens must be an int from 0 to 32"):
            LongSpecDraftConfig(lookup_tokens=bad)
    for bad in (-1, 33, True, 2.0, "3"):
        with pytest.raises(UnsupportedGenerationError, match=r"longspec_lookup_tokens=.*allowed: an int from 0 to 32"):
            target.generate(ids, assistant_model=draft, max_new_tokens=4, longspec_lookup_tokens=bad)
