"""Greedy exactness on the real embedded target (SmolLM2-135M-Instruct) with 2k-6k-token prompts
of real local text: speculative output == vanilla generate, token for token."""

import copy
from pathlib import Path

import pytest
import torch
from transformers import DynamicCache

from hf_longspec import LongSpecDraftModel
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.demo import load_draft_for
from oracle import SteeredDraft

NEW_TOKENS = 24


@pytest.fixture(scope="module")
def untrained_draft(embedded):
    target, _ = embedded
    return LongSpecDraftModel.from_target(target).eval()


def _prefilled(target, ids):
    """The prompt minus its last token in a cache: both runs resume from the same prefill."""
    cache = DynamicCache(config=target.config)
    with torch.no_grad():
        target(ids[:, :-1], past_key_values=cache, use_cache=True)
    return cache


def test_untrained_draft_default_tree_2k_code_prompt(embedded, untrained_draft):
    """The full user path, prefill included, with the paper's default tree (4,16,16,16,16)."""
    target, tokenizer = embedded
    ids = torch.tensor([long_prompt_ids(tokenizer, 2048, kind="code", seed=11)])
    reference = target.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)
    out = target.generate(ids, assistant_model=untrained_draft, max_new_tokens=NEW_TOKENS, do_sample=False)
    assert torch.equal(out, reference)
    assert untrained_draft.last_stats.new_tokens == NEW_TOKENS


@pytest.mark.parametrize(("length", "kind", "widths"), [(4096, "prose", [4, 4, 4]), (6000, "code", [2, 8, 8])])
def test_untrained_draft_long_prompts(embedded, untrained_draft, length, kind, widths):
    target, tokenizer = embedded
    ids = torch.tensor([long_prompt_ids(tokenizer, length, kind=kind, seed=length)])
    cache = _prefilled(target, ids)
    reference = target.generate(ids, past_key_values=copy.deepcopy(cache), max_new_tokens=NEW_TOKENS, do_sample=False)
    out = target.generate(ids, past_key_values=cache, assistant_model=untrained_draft, max_new_tokens=NEW_TOKENS,
                          do_sample=False, longspec_tree_widths=widths)
    assert torch.equal(out, reference)


STEERED_TOKENS = 31  # 1 from the prefill + 6 rounds of a depth-4 tree accepting everything


@pytest.fixture(scope="module")
def steered_case(embedded):
    """A 2500-token real code prompt, its prefilled cache, and vanilla greedy's continuation."""
    target, tokenizer = embedded
    ids = torch.tensor([long_prompt_ids(tokenizer, 2500, kind="code", seed=7)])
    cache = _prefilled(target, ids)
    reference = target.generate(ids, past_key_values=copy.deepcopy(cache), max_new_tokens=STEERED_TOKENS,
                                do_sample=False)
    return ids, cache, reference


def test_steered_chain_reaches_depth_plus_one_on_real_text(embedded, steered_case):
    """Rank 0 on a chain tree: the real draft, steered, is a perfect oracle."""
    target, _ = embedded
    ids, cache, reference = steered_case
    draft = SteeredDraft.from_target(target, reference=reference, ranks=(0,), tree_widths=[1, 1, 1, 1]).eval()
    out = target.generate(ids, past_key_values=copy.deepcopy(cache), assistant_model=draft, max_new_tokens=21,
                          do_sample=False)
    assert torch.equal(out, reference[:, : ids.shape[1] + 21])
    assert draft.last_stats.histogram() == {5: 4}
    assert draft.last_stats.tau == 5.0



@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_steered_non_chain_paths_on_real_text(embedded, steered_case, cache_implementation):
    """Widths [4, 4, 4, 4], reference token at ranks 1, 2, 3, 0, 2 by position: every round accepts
    a depth-4 path through second to fourth children, so the output is vanilla's only if the cache
    gather, tree mask and node positions are right on a real 2.5k-token context."""
    target, _ = embedded
    ids, cache, reference = steered_case
    draft = SteeredDraft.from_target(target, reference=reference, ranks=(1, 2, 3, 0, 2),
                                     tree_widths=[4, 4, 4, 4]).eval()
    prefilled = {} if cache_implementation else {"past_key_values": copy.deepcopy(cache)}
    out = target.generate(ids, assistant_model=draft, max_new_tokens=STEERED_TOKENS, do_sample=False,
                          cache_implementation=cache_implementation, **prefilled)
    assert torch.equal(out, reference)
    stats = draft.last_stats
    assert stats.histogram() == {5: 6}
    assert stats.tau == 5.0 and stats.non_chain_commits == stats.rounds == 6


LAYER4_DRAFT = Path(__file__).resolve().parents[1] / "docs/results/session26_2026-12-03/draft_layer4_9k"


def test_a_trained_draft_reading_target_layer_4_is_exact_on_a_real_prompt(embedded):
    """The twenty-sixth session's trained draft, which also cross-attends to target layer 4, loaded from its
    folder the way a user passes one. Trained, it commits several tokens per round on real code (tau 3.9
    here), so accepted multi-token paths run through both layers' K/V, and the output is still vanilla
    greedy's."""
    target, tokenizer = embedded
    draft, _ = load_draft_for(target, str(LAYER4_DRAFT))
    assert draft.target_layers == (29, 4)
    ids = torch.tensor([long_prompt_ids(tokenizer, 512, kind="code", split="eval", seed=3)])
    reference = target.generate(ids, max_new_tokens=32, do_sample=False)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=32, do_sample=False, longspec_lookup_tokens=0)
    assert torch.equal(out, reference)
    assert draft.last_stats.tau > 2.0


def test_the_shipped_draft_reads_target_layer_4_and_is_exact_on_a_real_prompt(embedded):
    """The draft shipped since the twenty-seventh session also cross-attends to target layer 4; loaded the
    way the main job loads it ('embedded'), on real prose, its output is vanilla greedy's with its own tree alone
    (several tokens per round, so accepted paths run through both layers' K/V), with its default chain beside
    it, with its leaves re-ranked, and with the round a call on a CPU drafts by default (1-1-1 and a 16-token
    chain)."""
    target, tokenizer = embedded
    draft, _ = load_draft_for(target, "embedded")
    assert draft.target_layers == (29, 4) and draft.config.lookup_tokens == 32
    # its GPU tree re-ranks its leaves, its CPU round does not (forty-fourth session)
    assert draft.config.tree_rerank_leaves is True and draft.config.cpu_tree_rerank_leaves is False
    ids = torch.tensor([long_prompt_ids(tokenizer, 512, kind="prose", split="eval", seed=5)])
    reference = target.generate(ids, max_new_tokens=32, do_sample=False)
    own_tree = dict(max_new_tokens=32, do_sample=False, longspec_tree_widths=draft.config.tree_widths,
                    longspec_plain_steps=False)  # rounds only: tau is asserted below
    alone = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=0, **own_tree)
    assert torch.equal(alone, reference)
    assert draft.last_stats.tau > 2.0 and draft.last_stats.tree_widths == (4, 16, 16, 16, 16)
    assert torch.equal(target.generate(ids, assistant_model=draft, longspec_lookup_tokens=32, **own_tree), reference)
    # its 16 leaves re-ranked over all 53 nodes it runs: leaves at every depth, the same tokens
    reranked = target.generate(ids, assistant_model=draft, longspec_lookup_tokens=0, longspec_rerank_leaves=True, **own_tree)
    assert torch.equal(reranked, reference) and draft.last_stats.rerank_leaves and draft.last_stats.tau > 2.0
    assert torch.equal(target.generate(ids, assistant_model=draft, max_new_tokens=32, do_sample=False), reference)
    assert (draft.last_stats.tree_widths, draft.last_stats.lookup_tokens, draft.last_stats.rerank_leaves) == \
        ((1, 1, 1), 16, False)


def test_a_cross_attention_window_keeps_generate_exact_and_gets_its_own_captured_round(embedded):
    """cross_attention_window (the shipped draft reading the 4 anchors and the newest 64 entries of a real
    512-token prompt) changes what the draft proposes, never the output. Asked per call
    (longspec_cross_attention_window) it gives the rounds of a draft whose config has it, and leaves the config
    alone; 0 per call reads every entry whatever the config says. Setting the config on a draft that already
    generated gives a decoder of its own (a captured round would still read the window it was captured with)."""
    target, tokenizer = embedded
    draft, _ = load_draft_for(target, "embedded")
    fresh, _ = load_draft_for(target, "embedded")
    shipped = draft.config.cross_attention_window  # the shipped draft's own window (2048: the whole 512-token prompt)
    fresh.config.cross_attention_window = 64
    ids = torch.tensor([long_prompt_ids(tokenizer, 512, kind="prose", split="eval", seed=5)])
    reference = target.generate(ids, max_new_tokens=32, do_sample=False)
    # rounds only: the rounds' lengths are what tells the windows' proposals apart (plain steps, which a call on a
    # CPU may take where rounds lose, would come and go with the machine's timing)
    options = dict(max_new_tokens=32, do_sample=False, longspec_lookup_tokens=0, longspec_plain_steps=False)
    assert torch.equal(target.generate(ids, assistant_model=draft, **options), reference)
    whole = draft.last_stats.round_lengths
    assert torch.equal(target.generate(ids, assistant_model=draft, longspec_cross_attention_window=64, **options),
                       reference)
    per_call = draft.last_stats.round_lengths
    assert draft.config.cross_attention_window == shipped
    assert torch.equal(target.generate(ids, assistant_model=fresh, **options), reference)
    windowed = fresh.last_stats.round_lengths
    assert per_call == windowed and windowed != whole
    assert torch.equal(target.generate(ids, assistant_model=fresh, longspec_cross_attention_window=0, **options),
                       reference)
    assert fresh.last_stats.round_lengths == whole
    draft.config.cross_attention_window = 64
    assert torch.equal(target.generate(ids, assistant_model=draft, **options), reference)
    assert draft.last_stats.round_lengths == windowed
    # the window is in the decoder's key: on CUDA a captured round bakes the reading in, so a round captured
    # without the window must not serve a call with it (on the CPU nothing is captured; the key is checked here)
    assert len(draft.__dict__["_longspec_decoders"]) == 2
