"""Batched tree speculation: left-padded prompts of different lengths, one target forward per round
for the whole batch, per-row acceptance and commit, rows that stop early. Greedy output must equal
vanilla batched generate, and each row must equal that row generated alone (float32)."""

import pytest
import torch

from conftest import left_padded_batch, perturbed_pair, random_prompt, tiny_llama
from hf_longspec import UnsupportedGenerationError
from hf_longspec.testing import SteeredDraft

NEW = 20


@pytest.fixture(scope="module")
def pair():
    target, draft = perturbed_pair((3, 3, 3))
    target.generation_config.pad_token_id = 0
    return target, draft


def test_batch_with_logits_processors_equals_vanilla_batched(pair):
    """Processors that read each row's ids (repetition penalty, no-repeat n-grams) run row by row on
    the host walk, with the row's own committed ids (its left padding included, as generate() has it)."""
    target, draft = pair
    rows, ids, mask = left_padded_batch()
    options = dict(max_new_tokens=NEW, do_sample=False, repetition_penalty=1.3, no_repeat_ngram_size=3)
    reference = target.generate(ids, attention_mask=mask, **options)
    out = target.generate(ids, attention_mask=mask, assistant_model=draft, **options)
    assert torch.equal(out, reference)
    assert draft.last_stats.rounds > 0 and draft.last_stats.tau > 1.0


@pytest.mark.parametrize("mode", ["hybrid", "masked"])
def test_batch_equals_vanilla_batched_and_each_row_alone(pair, mode):
    target, draft = pair
    rows, ids, mask = left_padded_batch()
    reference = target.generate(ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False)
    out = target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=NEW, do_sample=False,
                          longspec_verify_attention=mode)
    assert torch.equal(out, reference)
    assert draft.last_stats.emitted_tokens == len(rows) * (NEW - 1)  # every row's rounds, the prefill token aside
    for i, row in enumerate(rows):
        alone = target.generate(row[None], assistant_model=draft, max_new_tokens=NEW, do_sample=False)
        assert torch.equal(alone[0, -NEW:], out[i, -NEW:]), f"row {i}"


def test_rows_accept_different_paths_in_one_round(pair):
    """Row 0 is steered onto its own continuation (non-chain multi-token commits), rows 1-2 accept
    roots only: per-row acceptance, per-row commit and per-row positions all decide the output."""
    target, _ = pair
    rows, ids, mask = left_padded_batch()
    reference = target.generate(ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False)
    row0 = target.generate(rows[0][None], max_new_tokens=NEW + 5, do_sample=False)
    steered = SteeredDraft.from_target(target, row0, ranks=(0, 1, 2), sliding_window=16, tree_widths=[3, 3, 3])
    out = target.generate(ids, attention_mask=mask, assistant_model=steered, max_new_tokens=NEW, do_sample=False)
    assert torch.equal(out, reference)
    stats = steered.last_stats
    assert stats.non_chain_commits > 0 and max(stats.histogram()) == 4 and min(stats.histogram()) == 1
    # per row, in order: row 0 commits whole 4-token paths (its last round cut by max_new_tokens), the
    # others mostly a root's miss and the target's token; every row's rounds emit all but its prefill token
    assert stats.round_lengths[0] == [4, 4, 4, 4, 3]
    assert all(sum(stats.round_lengths[row]) == NEW - 1 for row in (0, 1, 2))
    assert all(stats.round_lengths[row].count(1) >= len(stats.round_lengths[row]) - 2 for row in (1, 2))


def test_reranked_leaves_hang_at_each_rows_own_depths(pair):
    """Re-ranked leaves in a left-padded batch: row 0 is steered so that guesses near the root become leaves,
    the others accept little; each row's leaves sit at its own depths and positions, and the output is
    vanilla batched generate's."""
    target, _ = pair
    rows, ids, mask = left_padded_batch()
    reference = target.generate(ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False)
    row0 = target.generate(rows[0][None], max_new_tokens=NEW + 5, do_sample=False)
    steered = SteeredDraft.from_target(target, row0, ranks=(0, 1, 0, 2, 0, 0), sliding_window=16, tree_widths=[1, 2, 2, 3])
    out = target.generate(ids, attention_mask=mask, assistant_model=steered, max_new_tokens=NEW, do_sample=False,
                          longspec_rerank_leaves=True)
    assert torch.equal(out, reference)
    assert steered.last_stats.rerank_leaves and max(steered.last_stats.round_lengths[0]) >= 4


def test_a_row_that_hits_eos_stops_without_stalling_the_others(pair):
    target, draft = pair
    _, ids, mask = left_padded_batch()
    free = target.generate(ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False)
    eos = int(free[1, ids.shape[1] + 4])  # row 1's 5th new token
    reference = target.generate(ids, attention_mask=mask, max_new_tokens=NEW, do_sample=False, eos_token_id=eos)
    out = target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=NEW, do_sample=False,
                          eos_token_id=eos)
    assert torch.equal(out, reference)  # the finished row is filled with the pad token, as generate() does
    assert (out[1, ids.shape[1] + 5:] == target.generation_config.pad_token_id).all()


def test_padding_never_enters_the_ring(pair):
    target, draft = pair
    _, ids, mask = left_padded_batch()
    starts = (ids.shape[1] - mask.sum(dim=1))
    ring = draft.start(ids, starts=starts)
    for row in range(ids.shape[0]):
        held = ring.positions[row][ring.positions[row] >= 0].sort().values
        real = int(mask[row].sum())
        assert held.tolist() == list(range(max(0, real - ring.window), real))  # exactly the real tokens


def test_batch_refusals_name_what_is_allowed(pair):
    target, draft = pair
    _, ids, mask = left_padded_batch()
    with pytest.raises(UnsupportedGenerationError, match="batch size 3: LongSpec returns scores.*batch size 1 only"):
        target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=4, output_scores=True,
                        return_dict_in_generate=True)
    with pytest.raises(UnsupportedGenerationError, match="a streamer supports batch size 1, like generate"):
        target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=4, streamer=object())
    right = mask.flip(1)
    with pytest.raises(UnsupportedGenerationError, match="left padding only"):
        target.generate(ids.flip(1), attention_mask=right, assistant_model=draft, max_new_tokens=4)


def test_memory_per_extra_row_is_its_kv_plus_a_constant_draft_state(pair):
    """What a decoder preallocates grows per row by that row's target KV at the bucket's capacity,
    plus the draft's ring and tree buffers, which do not depend on the context length."""
    from hf_longspec.generation import LongSpecDecoder, TreeLayout

    target, draft = pair
    layout = TreeLayout.plan([3, 3, 3], None, target.config.vocab_size)

    def sizes(batch, capacity):
        decoder = LongSpecDecoder(draft, layout, capacity, batch_size=batch)
        context = decoder.context
        return decoder.cache.nbytes, context.ring.nbytes + context.tree_keys.nbytes + context.tree_values.nbytes

    config = target.config
    head_dim = config.hidden_size // config.num_attention_heads
    row_kv = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 4  # bytes per token, fp32
    (kv1, draft1), (kv2, draft2), (kv2_long, draft2_long) = sizes(1, 1024), sizes(2, 1024), sizes(2, 4096)
    assert kv2 - kv1 == row_kv * 1024 and kv2_long - kv2 == 2 * row_kv * 3072
    assert draft2 == 2 * draft1 and draft2_long == draft2  # per row constant, whatever the context


@pytest.mark.parametrize("static", [False, True])
def test_the_prefill_cache_is_not_kept_twice(pair, static):
    """generate's prefill cache is freed layer by layer as the decoder copies it in (one copy of every
    row's KV at a time, not two), and refilled with the committed entries when the call ends."""
    from transformers import DynamicCache, StaticCache

    from hf_longspec.generation import LongSpecDecoder, TreeLayout
    from hf_longspec.target_support import cache_argument_name

    target, draft = pair
    _, ids, _ = left_padded_batch(lengths=(30, 30))
    cache = StaticCache(config=target.config, max_cache_len=64) if static else DynamicCache(config=target.config)
    target(ids, **{cache_argument_name(target): cache}, use_cache=True)
    prefilled = [(layer.keys[:, :, :30].clone(), layer.values[:, :, :30].clone()) for layer in cache.layers]
    decoder = LongSpecDecoder(draft, TreeLayout.plan([3, 3, 3], None, target.config.vocab_size), 1024, batch_size=2)
    decoder.start(ids, cache, torch.tensor([1, 2]))
    assert all(layer.keys.numel() == 0 and layer.values.numel() == 0 for layer in cache.layers)
    decoder.finish([30, 30], cache)
    for layer, (keys, values) in zip(cache.layers, prefilled):
        assert layer.keys.shape[2] == (64 if static else 30)
        assert torch.equal(layer.keys[:, :, :30], keys) and torch.equal(layer.values[:, :, :30], values)


@pytest.mark.parametrize("user_cache", [False, True])
def test_the_prompt_is_prefilled_straight_into_the_preallocated_cache(pair, monkeypatch, user_cache):
    """With an empty cache the prompt's forward writes its K/V into the decoder's buffers: nothing is
    copied in (``load`` is never called), so no moment holds a row's KV twice. The committed KV is
    written back only into a cache the caller passed (or asked for): there it equals vanilla's."""
    from transformers import DynamicCache

    from hf_longspec.generation.tree_cache import TreeKVCache

    target, draft = pair
    rows, ids, mask = left_padded_batch()

    def no_copy(*args, **kwargs):
        raise AssertionError("the prompt's KV was copied in from generate's prefill cache")

    monkeypatch.setattr(TreeKVCache, "load", no_copy)
    options = dict(attention_mask=mask, max_new_tokens=NEW, do_sample=False)
    cache = DynamicCache(config=target.config) if user_cache else None
    extra = {"past_key_values": cache} if user_cache else {}
    out = target.generate(ids, assistant_model=draft, **options, **extra)
    reference_cache = DynamicCache(config=target.config)
    reference = target.generate(ids, past_key_values=reference_cache, **options)
    assert torch.equal(out, reference)
    if user_cache:  # vanilla's layout: slot = column of the sequences, each row after its left padding
        assert cache.get_seq_length() == reference_cache.get_seq_length() == out.shape[1] - 1
        for row, prompt in enumerate(rows):
            pad = ids.shape[1] - len(prompt)
            for mine, theirs in zip(cache.layers, reference_cache.layers):
                for ours, vanillas in ((mine.keys, theirs.keys), (mine.values, theirs.values)):
                    torch.testing.assert_close(ours[row, :, pad:], vanillas[row, :, pad:])
                    assert not ours[row, :, :pad].any()  # padding slots: zeros (vanilla's hold masked pad K/V)


def test_a_large_batch_drafts_smaller_trees_and_stays_exact(pair, monkeypatch):
    """``tree_batch_nodes`` caps the nodes drafted per round over the whole batch (the verification
    forward grows with rows x nodes): 3 rows under a cap of 12 draft 4 nodes each instead of 9. An
    explicit ``longspec_max_nodes`` wins. Output stays vanilla's."""
    target, draft = pair
    rows, ids, mask = left_padded_batch()
    monkeypatch.setattr(draft.config, "tree_batch_nodes", 12)
    options = dict(attention_mask=mask, max_new_tokens=NEW, do_sample=False)
    reference = target.generate(ids, **options)
    out = target.generate(ids, assistant_model=draft, **options)
    stats = draft.last_stats
    assert torch.equal(out, reference)
    assert stats.drafted_nodes == 4 * stats.rounds
    out = target.generate(ids, assistant_model=draft, longspec_max_nodes=9, **options)
    assert torch.equal(out, reference) and draft.last_stats.drafted_nodes == 9 * draft.last_stats.rounds
    alone = target.generate(rows[0][None], assistant_model=draft, max_new_tokens=NEW, do_sample=False)
    assert torch.equal(alone[0, -NEW:], out[0, -NEW:])
    assert draft.last_stats.drafted_nodes == 9 * draft.last_stats.rounds  # one row: 12 // 1 leaves the tree whole
    with pytest.raises(ValueError, match="tree_batch_nodes must be a positive int or None"):
        type(draft.config)(tree_batch_nodes=0)


def test_a_batch_continues_from_its_returned_cache_like_vanilla(pair):
    """Multi-turn batching: the cache a batched call fills is laid out as vanilla's (each row after its
    left padding), so a second call on the returned sequences, with that cache, speculates and equals
    vanilla's second call on vanilla's cache."""
    from transformers import DynamicCache

    target, draft = pair
    rows, ids, mask = left_padded_batch()
    options = dict(max_new_tokens=8, do_sample=False)
    caches = {}
    outs = {}
    for name, extra in (("vanilla", {}), ("longspec", {"assistant_model": draft})):
        caches[name] = DynamicCache(config=target.config)
        first = target.generate(ids, attention_mask=mask, past_key_values=caches[name], **options, **extra)
        longer = torch.cat([mask, torch.ones_like(first[:, ids.shape[1]:])], dim=1)
        outs[name] = target.generate(first, attention_mask=longer, past_key_values=caches[name], **options, **extra)
    assert torch.equal(outs["longspec"], outs["vanilla"])
    assert draft.last_stats.rounds > 0


def test_continuing_a_batch_whose_row_stopped_early_is_refused(pair):
    """A row that hit eos has no K/V after it in the returned cache (vanilla keeps feeding it pad tokens
    and caches their K/V), so continuing from that cache could differ from vanilla: refused, naming the
    row and what is allowed, before any forward."""
    from transformers import DynamicCache

    from hf_longspec import UnsupportedGenerationError

    target, draft = pair
    rows, ids, mask = left_padded_batch()
    plain = target.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False)[:, ids.shape[1]:].tolist()
    # an eos that only row 1 generates, after at least 2 tokens: row 1 stops early, the others run to the end
    eos = next(t for k, t in enumerate(plain[1]) if k >= 2 and t not in plain[1][:k] and t not in plain[0] + plain[2])
    cache = DynamicCache(config=target.config)
    first = target.generate(ids, attention_mask=mask, past_key_values=cache, assistant_model=draft, max_new_tokens=8,
                            do_sample=False, eos_token_id=eos, pad_token_id=0)
    assert torch.equal(first, target.generate(ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                                              eos_token_id=eos, pad_token_id=0))
    longer = torch.cat([mask, torch.ones_like(first[:, ids.shape[1]:])], dim=1)
    assert first[1, -1] == 0 and first[0, -1] != 0  # row 1 was filled with the pad token after its eos
    with pytest.raises(UnsupportedGenerationError, match=r"row\(s\) \[1\] stopped early"):
        target.generate(first, attention_mask=longer, past_key_values=cache, assistant_model=draft, max_new_tokens=4)


@pytest.mark.parametrize("chain", [16, 0])
def test_a_row_that_finishes_inside_a_long_path_never_writes_past_the_cache(chain, monkeypatch):
    """Rows of a batch finish at different rounds, and a finished row is still drafted and verified on
    (static shapes) until the last row stops. Its last round may accept a path longer than what it had
    left to emit; committed whole, that row then sat past max_length, and its tree was written past
    the cache whenever max_length + nodes filled the capacity bucket exactly: an IndexError on the CPU,
    a device-side assert on the GPU (batch 8 at 8k with the default chain, H200, tenth session).
    Here row 0's draft is steered onto its greedy continuation (its rounds accept the tree's whole
    depth, 4 tokens, or the chain's run) and row 1's is not, so row 0 tends to finish first, and its
    last round reaches past its end; every row must still equal vanilla batched greedy."""
    from hf_longspec.generation.decoder import CAPACITY_BUCKET, LongSpecDecoder

    widths = [2, 3, 3]
    max_length = CAPACITY_BUCKET - (1 + sum(widths) + chain)  # max_length + the round's nodes = the capacity
    target = tiny_llama()  # greedy output settles into runs, which the chain copies
    overshot_then_ran_on = []  # per commit: an active row accepted more than it had left, another row went on
    commit = LongSpecDecoder._commit

    def watched(self, path_nodes, accepted, roots):
        past = accepted * self.active > max_length - 1 - self.cache.lengths
        overshot_then_ran_on.append(bool(past.any() and (~past & self.active).any()))
        return commit(self, path_nodes, accepted, roots)

    monkeypatch.setattr(LongSpecDecoder, "_commit", watched)
    options = dict(do_sample=False, return_dict_in_generate=True)
    for new in (38, 39):  # lengths where, on the code before the fix, a finished row's tree left the cache
        ids = torch.cat([random_prompt(max_length - new, seed=1), random_prompt(max_length - new, seed=2)])
        vanilla = target.generate(ids, max_new_tokens=new, **options)
        torch.manual_seed(0)  # the draft's own weights, which rank row 1's proposals
        draft = SteeredDraft.from_target(target, vanilla.sequences[:1], tree_widths=widths, sliding_window=16)
        out = target.generate(ids, assistant_model=draft, max_new_tokens=new, longspec_lookup_tokens=chain, **options)
        assert torch.equal(out.sequences, vanilla.sequences), new
        # the returned cache holds every emitted token but the last, as vanilla's: a row's last round
        # committed up to its end, not short of it
        mine, theirs = (o.cache if "cache" in o else o.past_key_values for o in (out, vanilla))
        for a, b in zip(mine.layers, theirs.layers):
            assert torch.allclose(a.keys[:, :, :max_length - 1], b.keys[:, :, :max_length - 1], atol=1e-5)
            assert torch.allclose(a.values[:, :, :max_length - 1], b.values[:, :, :max_length - 1], atol=1e-5)
    assert any(overshot_then_ran_on)  # the case this test is about happened
