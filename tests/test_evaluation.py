"""hf_longspec.evaluation: held-out prompts whose lengths continue the same text."""

import math
import statistics

import pytest

from conftest import perturbed_pair, random_prompt
from hf_longspec.evaluation import held_out_prompts, measure_tau, own_round, suffix_ids


def test_suffix_ids_cuts_the_front_of_the_document_and_keeps_the_template():
    ids = [90, 91] + list(range(10)) + [98, 99]  # head of 2, document of 10, tail of 2
    assert suffix_ids(ids, 6, head=2, tail=2) == [90, 91, 8, 9, 98, 99]
    assert suffix_ids(list(range(10)), 3) == [7, 8, 9]
    assert suffix_ids(ids, 14, head=2, tail=2) == ids
    for length in (4, 15):  # no room for the document, or longer than the prompt
        with pytest.raises(ValueError, match=f"cannot cut a 14-token prompt to {length} tokens"):
            suffix_ids(ids, length, head=2, tail=2)


def test_held_out_prompts_of_one_seed_end_alike(embedded):
    """The training scripts' eval prompts (ablate_training, train_smollm2_draft): per (kind, seed)
    the shorter prompts are suffixes of the longest, in the order kind, length, seed."""
    _, tokenizer = embedded
    # the longest spans several files: two seeds' shuffles may well open with the same file (on a
    # machine with matplotlib installed, prose seeds 100 and 101 both open with numpy's mt19937 license)
    prompts = held_out_prompts(tokenizer, lengths=(64, 2048), kinds=("code", "prose"), per_cell=2)
    assert [(kind, length) for kind, length, _ in prompts] == [
        (kind, length) for kind in ("code", "prose") for length in (64, 2048) for _ in range(2)]
    for kind in ("code", "prose"):
        short = [ids[0].tolist() for k, n, ids in prompts if k == kind and n == 64]
        long = [ids[0].tolist() for k, n, ids in prompts if k == kind and n == 2048]
        assert all(len(s) == 64 and s == l[-64:] for s, l in zip(short, long))
        assert short[0] != short[1]  # two seeds, two texts


def test_prompt_digest_names_the_token_ids_and_same_prompts_compares_them():
    """A prompt's digest depends on its ids only (a list or a tensor alike); two reports' prompt lists
    pair when kinds and lengths match and, where both recorded digests, the digests do."""
    import torch

    from hf_longspec.evaluation import prompt_digest, same_prompts

    assert prompt_digest([1, 2, 3]) == prompt_digest(torch.tensor([[1, 2, 3]])) != prompt_digest([1, 2, 4])
    assert prompt_digest([12, 3]) != prompt_digest([1, 23])  # tokens are separated, not run together
    named = [{"kind": "code", "length": 2048, "digest": prompt_digest([1, 2])}]
    plain = [{"kind": "code", "length": 2048}]
    assert same_prompts(named, named) and same_prompts(named, plain) and same_prompts(plain, named)
    assert not same_prompts(named, [{**named[0], "digest": prompt_digest([2, 1])}])
    assert not same_prompts(plain, [{"kind": "code", "length": 8000}]) and not same_prompts(plain, plain * 2)


def test_paired_difference_is_the_mean_its_standard_error_and_the_counts():
    """evaluation.paired_difference, which feature_probe, compare_tau and ablate_training report: a
    difference of exactly zero counts as equal, not better or worse."""
    from hf_longspec.evaluation import paired_difference

    paired = paired_difference([0.5, -0.25, 0.0, 1.0])
    assert paired["mean"] == pytest.approx(0.3125)
    assert paired["stderr"] == pytest.approx(statistics.stdev([0.5, -0.25, 0.0, 1.0]) / 2)
    assert (paired["better"], paired["worse"], paired["equal"], paired["count"]) == (2, 1, 1, 4)
    assert math.isnan(paired_difference([0.3])["stderr"])  # one prompt has no spread to measure


def test_tau_is_measured_on_the_drafts_own_round_on_a_cpu_too():
    """A config's CPU round (cpu_tree_widths, cpu_lookup_tokens, cpu_tree_rerank_leaves) and its plain steps
    (cpu_plain_steps) are speed choices: measure_tau, which the training evals and the tau goals use, drafts the draft's tree and chain on
    every device in every step, unless told."""
    target, draft = perturbed_pair((3, 3, 3))
    draft.config.update({"lookup_tokens": 5, "cpu_tree_widths": [1, 1], "cpu_lookup_tokens": 2, "cpu_plain_steps": True,
                         "tree_rerank_leaves": True, "cpu_tree_rerank_leaves": False})
    prompts = [("code", 40, random_prompt(length=40))]
    measured = measure_tau(target, draft, prompts, max_new_tokens=8, longspec_compile=False)["per_prompt"][0]
    assert (measured["tree_widths"], measured["lookup_tokens"]) == ([3, 3, 3], 5)
    assert measured["rerank_leaves"]  # the config's tree_rerank_leaves, not its CPU round's (forty-fourth session)
    assert own_round(draft)["longspec_plain_steps"] is False and measured["plain_steps"] == 0  # tau is the draft's
    alone = measure_tau(target, draft, prompts, max_new_tokens=8, longspec_lookup_tokens=0)["per_prompt"][0]
    assert (alone["tree_widths"], alone["lookup_tokens"]) == ([3, 3, 3], 0)
    generated = target.generate(prompts[0][2], assistant_model=draft, max_new_tokens=8, do_sample=False)
    assert draft.last_stats.tree_widths == (1, 1) and generated.shape[1] == 48  # a plain call: the CPU round
    assert not draft.last_stats.rerank_leaves  # and its leaves as cpu_tree_rerank_leaves says
