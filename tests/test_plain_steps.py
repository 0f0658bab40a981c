"""Plain steps (longspec_plain_steps): one-token steps taken instead of rounds where rounds deliver fewer tokens per
second. The choice is the policy's (timed on the running call); here a fixed schedule replaces it, so each test
knows which steps were plain: the output must stay vanilla's, with plain steps between non-chain multi-token
commits, in a left-padded batch, for the cache handed back, and on the real embedded target."""

import pytest
import torch
from transformers import GenerationConfig

from conftest import left_padded_batch, perturbed_pair, random_prompt, tiny_llama
from hf_longspec import UnsupportedGenerationError
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.demo import load_draft_for
from hf_longspec.generation import loop
from hf_longspec.generation.plain_steps import PlainStepPolicy
from oracle import SteeredDraft


def _scheduled(monkeypatch, schedule: str, chain_hits: list | None = None):
    """Replace the policy by a fixed schedule: 'p' a plain step, 'r' a round, cycled; returns what ran, in order.
    ``chain_hits``: gets, per plain step, whether the loop reported the lookup chain guessing its token."""
    ran = []

    class Scheduled(PlainStepPolicy):
        def plain_next(self):
            plain = schedule[len(ran) % len(schedule)] == "p"
            ran.append("p" if plain else "r")
            return plain

        def record(self, plain, tokens, seconds, timed=True, chain_hit=False):
            if plain and chain_hits is not None:
                chain_hits.append(chain_hit)
            super().record(plain, tokens, seconds, timed, chain_hit)

    monkeypatch.setattr(loop, "PlainStepPolicy", Scheduled)
    return ran


def _steered_case(new_tokens, widths=(3, 3, 3), ranks=(1, 2, 0)):
    target = tiny_llama(initializer_range=0.3)
    ids = random_prompt()
    reference = target.generate(ids, max_new_tokens=new_tokens, do_sample=False)
    target, draft = perturbed_pair(widths, SteeredDraft)
    return target, draft.steer(reference, ranks), ids, reference


@pytest.mark.parametrize("mode", ["hybrid", "masked"])
def test_plain_steps_between_non_chain_commits_keep_greedy_exact(monkeypatch, mode):
    """Rounds accept full-depth paths through second and third children; plain steps in between must commit the
    root to the target cache, the draft's ring and the lookup history exactly as a round would, or the next
    round drafts from the wrong state and the output leaves vanilla's."""
    target, draft, ids, reference = _steered_case(40)
    ran = _scheduled(monkeypatch, "rpprp")
    out = target.generate(ids, assistant_model=draft, max_new_tokens=40, do_sample=False, longspec_plain_steps=True,
                          longspec_lookup_tokens=4, longspec_verify_attention=mode)
    assert torch.equal(out, reference)
    stats = draft.last_stats
    assert stats.plain_steps == ran.count("p") > 0 and stats.rounds == ran.count("r") > 0
    assert stats.emitted_tokens + stats.plain_steps == 39  # the prefill gave the first token
    assert stats.non_chain_commits == stats.rounds and stats.tau >= 3  # rounds still accept whole steered paths
    # every committed token (all but the last, the uncommitted root) is in the draft's ring (16 slots, so it wrapped)
    # and in the lookup history, where a round would have put it: what the next round drafts from
    (decoder,), = draft.__dict__["_longspec_decoders"].values()
    committed = out[:, :-1]
    expected = draft.start(committed)
    ring = decoder.context.ring
    assert torch.equal(ring.positions, expected.positions)
    torch.testing.assert_close(ring.keys, expected.keys)
    torch.testing.assert_close(ring.values, expected.values)
    assert torch.equal(decoder.lookup.history[:, : committed.shape[1]], committed)
    assert int(decoder.cache.lengths) == committed.shape[1]


@pytest.mark.parametrize("guess_right", [True, False])
def test_a_plain_step_reports_whether_the_lookup_chain_guessed_its_token(monkeypatch, guess_right):
    """The signal that ends a run of plain steps at once (plain_steps.CHAIN_HITS_FOR_A_ROUND): the chain's first
    token against the token the step took. The chain is made to guess the reference's next token, or another."""
    from hf_longspec.generation.lookup import PromptLookup

    target, draft, ids, reference = _steered_case(20)
    chain = torch.as_tensor(reference[0])

    def propose(self, lengths, roots):  # committed tokens + the root are reference[:, :lengths + 1]
        following = chain[lengths + 1] if guess_right else (chain[lengths + 1] + 1) % 96
        return following[:, None].repeat(1, self.length), torch.ones(len(lengths), self.length, dtype=torch.bool)

    monkeypatch.setattr(PromptLookup, "propose", propose)
    hits = []
    _scheduled(monkeypatch, "rpppp", hits)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=20, do_sample=False, longspec_plain_steps=True,
                          longspec_lookup_tokens=4)
    assert torch.equal(out, reference) and len(hits) >= 8
    assert all(hits) if guess_right else not any(hits)


def test_plain_steps_hand_back_vanillas_cache(monkeypatch):
    target, draft, ids, reference = _steered_case(30)
    _scheduled(monkeypatch, "rp")
    kwargs = dict(max_new_tokens=30, do_sample=False, return_dict_in_generate=True)
    vanilla = target.generate(ids, **kwargs)
    out = target.generate(ids, assistant_model=draft, longspec_plain_steps=True, **kwargs)
    assert torch.equal(out.sequences, reference) and draft.last_stats.plain_steps > 0
    length = reference.shape[1] - 1
    mine, theirs = (o.cache if "cache" in o else o.past_key_values for o in (out, vanilla))
    for a, b in zip(mine.layers, theirs.layers):
        torch.testing.assert_close(a.keys[:, :, :length], b.keys[:, :, :length], atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(a.values[:, :, :length], b.values[:, :, :length], atol=1e-5, rtol=1e-5)


def test_plain_steps_in_a_left_padded_batch_with_a_row_stopping_early(monkeypatch):
    target, draft = perturbed_pair((3, 3, 3))
    target.generation_config.pad_token_id = 0
    _, ids, mask = left_padded_batch()
    reference = target.generate(ids, attention_mask=mask, max_new_tokens=20, do_sample=False)
    eos = int(reference[1, 30 + 6])  # row 1 stops at its seventh new token; the others go on
    reference = target.generate(ids, attention_mask=mask, max_new_tokens=20, do_sample=False, eos_token_id=eos)
    _scheduled(monkeypatch, "ppr")
    out = target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=20, do_sample=False,
                          eos_token_id=eos, longspec_plain_steps=True)
    assert torch.equal(out, reference) and draft.last_stats.plain_steps > 0


def test_sampled_plain_steps_apply_the_warpers(monkeypatch):
    """A sampled plain step draws from the warped distribution: with top_k=1 that is the greedy token, so the
    output must be greedy's (a plain step sampling from the raw logits would leave it)."""
    target, draft, ids, reference = _steered_case(24)
    _scheduled(monkeypatch, "pr")
    torch.manual_seed(0)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=24, do_sample=True, top_k=1, temperature=3.0,
                          longspec_plain_steps=True)
    assert torch.equal(out, reference) and draft.last_stats.plain_steps > 0


def test_plain_steps_are_off_unless_asked_and_refused_where_they_cannot_run():
    target, draft = perturbed_pair()
    ids = random_prompt()
    target.generate(ids, assistant_model=draft, max_new_tokens=12, do_sample=False)
    assert draft.last_stats.plain_steps == 0  # the class config keeps cpu_plain_steps False
    with pytest.raises(UnsupportedGenerationError, match=r"longspec_plain_steps='yes'; allowed: True, False or None"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, longspec_plain_steps="yes")
    with pytest.raises(UnsupportedGenerationError, match="generation_config.longspec_plain_steps=1"):
        config = GenerationConfig(max_new_tokens=4, do_sample=False, longspec_plain_steps=1)
        target.generate(ids, assistant_model=draft, generation_config=config)
    with pytest.raises(UnsupportedGenerationError, match="output_scores / output_logits; allowed there: False"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, longspec_plain_steps=True, output_scores=True,
                        return_dict_in_generate=True)
    # nothing was left half-done: a valid call still matches vanilla
    reference = target.generate(ids, max_new_tokens=8, do_sample=False)
    assert torch.equal(target.generate(ids, assistant_model=draft, max_new_tokens=8, do_sample=False), reference)


def test_the_policy_takes_the_faster_and_probes_rounds_while_plain_steps_lead():
    policy = PlainStepPolicy(newest_weight=1.0, probe_every=2, probe_every_max=8)
    assert not policy.plain_next()  # rounds first
    policy.record(False, tokens=3, seconds=9.0, timed=False)  # a warm-up round says nothing
    assert not policy.plain_next()
    policy.record(False, tokens=3, seconds=0.3)  # 10 tokens/s
    assert policy.plain_next()  # price a plain step once
    policy.record(True, tokens=1, seconds=0.05)  # 20 tokens/s: plain steps lead
    runs = []
    for _ in range(12):
        plain = policy.plain_next()
        runs.append("p" if plain else "r")
        policy.record(plain, tokens=1 if plain else 3, seconds=0.05 if plain else 0.3)  # rounds keep losing
    # a probe round after 2 plain steps, then after 4, then 8 (doubling up to the maximum)
    assert "".join(runs) == "p" + "r" + "pppp" + "r" + "ppppp"
    policy.record(False, tokens=20, seconds=0.3)  # the draft hits again: rounds lead
    assert not policy.plain_next() and policy.probe_every == 2
    policy = PlainStepPolicy(newest_weight=1.0, probe_every=8)
    policy.record(False, tokens=3, seconds=0.3)
    for hit in (True, False, True):  # plain steps lead; the chain guesses, not in a row
        policy.record(True, tokens=1, seconds=0.05, chain_hit=hit)
        assert policy.plain_next()
    policy.record(True, tokens=1, seconds=0.05, chain_hit=True)
    assert not policy.plain_next()  # two guesses in a row: a round takes the chain's run at once
    policy.record(False, tokens=3, seconds=0.3)
    assert policy.plain_next() and policy.chain_hits_in_a_row == 0
    policy = PlainStepPolicy(newest_weight=1.0, probe_every=8, chain_hits_for_a_round=3)  # a stricter call
    policy.record(False, tokens=3, seconds=0.3)
    for _ in range(2):
        policy.record(True, tokens=1, seconds=0.05, chain_hit=True)
        assert policy.plain_next()
    policy.record(True, tokens=1, seconds=0.05, chain_hit=True)
    assert not policy.plain_next()
    policy = PlainStepPolicy(newest_weight=1.0)
    policy.record(False, tokens=3, seconds=0.3, timed=False)
    policy.record(False, tokens=3, seconds=0.3)
    policy.record(True, tokens=1, seconds=0.5)  # 2 tokens/s: rounds lead, no more plain steps
    assert not any(policy.plain_next() for _ in range(5))


def test_plain_steps_keep_the_shipped_draft_exact_on_real_text(embedded, monkeypatch):
    """The shipped draft, with plain steps interleaved by a fixed schedule on a real 1.5k-token prompt: rounds
    after plain steps draft from the ring and lookup history the plain steps filled."""
    target, tokenizer = embedded
    draft, _ = load_draft_for(target, "embedded")
    assert draft.config.cpu_plain_steps  # the shipped config turns them on for calls on a CPU
    ids = torch.tensor([long_prompt_ids(tokenizer, 1500, kind="code", split="eval", seed=4)])
    reference = target.generate(ids, max_new_tokens=40, do_sample=False)
    ran = _scheduled(monkeypatch, "rrppr")
    out = target.generate(ids, assistant_model=draft, max_new_tokens=40, do_sample=False)
    assert torch.equal(out, reference)
    stats = draft.last_stats
    assert stats.plain_steps == ran.count("p") > 0 and stats.tau > 1.5
    assert stats.emitted_tokens + stats.plain_steps == 39


def test_the_main_job_report_counts_plain_steps_apart_from_tau():
    from hf_longspec.demo import RunReport

    stats = {"tau": 4.0, "rounds": 10, "lookup_commits": 0, "accepted_length_histogram": {4: 10}, "plain_steps": 27,
             "tree_widths": [1, 1, 1], "lookup_tokens": 16}
    report = RunReport(4000, 68, 1.0, 1.0, 9.0, 5.0, True, stats, "shipped SmolLM2 draft")
    assert "plain steps (one token each, where rounds lost; not in tau): 27" in "\n".join(report.lines())
    assert "plain steps" not in "\n".join(RunReport(4000, 68, 1.0, 1.0, 9.0, 5.0, True, {**stats, "plain_steps": 0},
                                                    "shipped SmolLM2 draft").lines())


def test_a_seeded_sampled_call_gives_the_same_tokens_however_fast_its_rounds_ran(embedded, monkeypatch):
    """transformers users make sampling reproducible with ``set_seed``; vanilla generate is. Plain steps and rounds
    draw their random numbers differently, so a call whose steps were chosen by wall-clock time (the policy, on by
    default on a CPU) drew other tokens from the same seed whenever the machine ran a round faster or slower. Here
    two calls see different clocks: seeded alike, a sampled call must give the same tokens, taking the same plain
    steps (its policy prices rounds instead of timing them); a greedy call's policy still times them."""
    import random
    import types

    from transformers import set_seed

    target, tokenizer = embedded
    draft, _ = load_draft_for(target, "embedded")
    ids = torch.tensor([long_prompt_ids(tokenizer, 400, kind="prose", split="eval", seed=5)])

    def with_clock(clock_seed, **options):
        durations = random.Random(clock_seed)
        now = [0.0]

        def perf_counter():  # every interval the loop times lasts a random 1 ms to 1 s
            now[0] += durations.uniform(0.001, 1.0)
            return now[0]

        monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=perf_counter))
        set_seed(0)
        out = target.generate(ids, assistant_model=draft, max_new_tokens=40, **options)
        return out, draft.last_stats

    first, first_stats = with_clock(1, do_sample=True)
    second, second_stats = with_clock(2, do_sample=True)
    assert torch.equal(first, second)
    assert first_stats.plain_steps == second_stats.plain_steps > 0 and first_stats.rounds == second_stats.rounds
    (greedy_first, first_stats), (greedy_second, second_stats) = (with_clock(seed, do_sample=False) for seed in (1, 2))
    assert first_stats.plain_steps != second_stats.plain_steps  # timed: the clock changes what a greedy call runs,
    assert torch.equal(greedy_first, greedy_second)  # not what it emits
