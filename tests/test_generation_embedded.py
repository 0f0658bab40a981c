"""Greedy exactness on the real embedded target (SmolLM2-135M-Instruct) with 2k-6k-token prompts
of real local text: speculative output == vanilla generate, token for token."""

import copy

import pytest
import torch
from transformers import DynamicCache

from hf_longspec import LongSpecDraftModel
from hf_longspec.corpus import long_prompt_ids
from oracle import OracleDraft

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


def test_oracle_draft_reaches_depth_plus_one_on_real_text(embedded):
    target, tokenizer = embedded
    oracle = OracleDraft.from_target(target, tree_widths=[1, 1, 1, 1]).eval()
    ids = torch.tensor([long_prompt_ids(tokenizer, 3000, kind="code", seed=5)])
    cache = _prefilled(target, ids)
    reference = target.generate(ids, past_key_values=copy.deepcopy(cache), max_new_tokens=21, do_sample=False)
    out = target.generate(ids, past_key_values=cache, assistant_model=oracle, max_new_tokens=21, do_sample=False)
    assert torch.equal(out, reference)
    assert oracle.last_stats.histogram() == {5: 4}
    assert oracle.last_stats.tau == 5.0
