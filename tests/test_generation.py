"""Tree speculation through target.generate on tiny random targets: routing, exactness (with
accepted paths that are not first-child chains), stopping, streaming, outputs, and clear errors.
The sampling distribution is tested in test_sampling.py."""

import pytest
import torch
from transformers import DynamicCache, StoppingCriteria, StoppingCriteriaList
from transformers.generation.streamers import BaseStreamer

from conftest import perturbed_pair, random_prompt, tiny_llama
from hf_longspec import IncompatibleDraftError, LongSpecDraftModel, UnsupportedGenerationError
from hf_longspec.generation import longspec_generate
from oracle import SteeredDraft

MASKED = {"longspec_verify_attention": "masked"}


def _target_and_draft(draft_class=LongSpecDraftModel, widths=(2, 3, 3), **target_kwargs):
    return perturbed_pair(widths, draft_class, **target_kwargs)


_prompt = random_prompt


@pytest.mark.parametrize("mode", ["masked", "hybrid"])
def test_greedy_matches_vanilla_and_stock_paths_stay_stock(mode):
    target, draft = _target_and_draft()
    ids = _prompt()
    reference = target.generate(ids, max_new_tokens=30, do_sample=False)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=30, do_sample=False,
                          longspec_verify_attention=mode)
    assert torch.equal(out, reference)
    stats = draft.last_stats
    assert stats.new_tokens == 30 and stats.emitted_tokens == 29 and stats.rounds >= 1
    assert sum(length * count for length, count in stats.histogram().items()) == stats.emitted_tokens
    assert list(stats.round_lengths) == [0] and sum(stats.round_lengths[0]) == stats.emitted_tokens
    assert len(stats.round_lengths[0]) == stats.rounds
    # binding selected the hybrid implementation once; it keeps sdpa for every non-tree call, and no
    # call switches model-wide state
    assert target.config._attn_implementation == "longspec_hybrid"
    # stock assisted generation with an ordinary HF assistant is untouched
    assistant = tiny_llama(seed=5, layers=1)
    assisted = target.generate(ids, assistant_model=assistant, max_new_tokens=12, do_sample=False)
    assert torch.equal(assisted, reference[:, : ids.shape[1] + 12])


def test_custom_generate_route_and_prefilled_cache():
    target, draft = _target_and_draft()
    ids = _prompt()
    reference = target.generate(ids, max_new_tokens=20, do_sample=False)
    out = target.generate(ids, custom_generate=longspec_generate, longspec_draft=draft, max_new_tokens=20,
                          do_sample=False, **MASKED)
    assert torch.equal(out, reference)
    cache = DynamicCache(config=target.config)
    with torch.no_grad():
        target(ids[:, :-1], past_key_values=cache, use_cache=True)
    out = target.generate(ids, past_key_values=cache, assistant_model=draft, max_new_tokens=20, do_sample=False, **MASKED)
    assert torch.equal(out, reference)


def test_tree_shape_from_generation_config_fields():
    from transformers import GenerationConfig

    target, draft = _target_and_draft()
    ids = _prompt()
    config = GenerationConfig(max_new_tokens=12, do_sample=False, longspec_tree_widths=[2, 2], longspec_max_nodes=3)
    out = target.generate(ids, assistant_model=draft, generation_config=config, **MASKED)
    assert torch.equal(out, target.generate(ids, max_new_tokens=12, do_sample=False))
    stats = draft.last_stats
    assert 0 < stats.drafted_nodes <= 3 * stats.rounds  # the node budget caps every tree


def _steered(reference, widths, ranks, **target_kwargs):
    """A target and a real (perturbed) draft steered onto `reference` with the given rank plan."""
    target, draft = _target_and_draft(SteeredDraft, widths=widths, **target_kwargs)
    return target, draft.steer(reference, ranks)


def _reference(new_tokens=None, **kwargs):
    """(prompt, vanilla greedy output) of the target that _target_and_draft builds."""
    target = tiny_llama(initializer_range=0.3)
    ids = _prompt()
    kwargs = {"max_new_tokens": new_tokens, "do_sample": False, **kwargs}
    return ids, target.generate(ids, **kwargs)


def test_steered_logits_put_the_reference_token_at_the_planned_rank():
    """The test helper itself: on-reference rows get reference[p + 1] at rank plan[p % len(plan)],
    lifted above the rest; other rows keep the real draft's order."""
    target, draft = _target_and_draft(SteeredDraft, widths=(4, 4, 4))
    reference = torch.randint(0, 96, (1, 30), generator=torch.Generator().manual_seed(4))
    draft.steer(reference, ranks=(0, 1, 2, 3))
    positions = torch.arange(20, 28)[None]
    tokens = reference[:, 20:28].clone()
    tokens[0, 5] = (tokens[0, 5] + 1) % 96  # one node off the reference
    real = torch.randn(1, 8, 96, generator=torch.Generator().manual_seed(5))
    steered = draft.steered_logits(real, tokens, positions)
    order = steered[0].argsort(dim=-1, descending=True)
    for row in range(8):
        position = 20 + row
        if row == 5:
            assert torch.equal(order[row], real[0, row].argsort(descending=True))
            continue
        rank = position % 4
        assert order[row, rank] == reference[0, position + 1]
        others = real[0, row].clone()
        others[reference[0, position + 1]] = float("-inf")
        assert torch.equal(order[row, :rank], others.topk(rank).indices)  # the real draft's top tokens
        log_q = torch.log_softmax(steered[0, row], dim=-1)
        assert log_q[reference[0, position + 1]] > -1.0 - torch.log(torch.tensor(rank + 1.0))
        assert log_q[order[row, rank + 1]] < -20  # everything below it is out of reach


def test_oracle_chain_reaches_depth_plus_one():
    """Rank 0 everywhere on a chain tree: the steered real draft is a perfect oracle."""
    ids, reference = _reference(41)
    target, draft = _steered(reference, (1, 1, 1, 1), ranks=(0,))
    out = target.generate(ids, assistant_model=draft, max_new_tokens=41, do_sample=False, **MASKED)
    assert torch.equal(out, reference)
    stats = draft.last_stats
    assert stats.histogram() == {5: 8}  # every round: 4 drafted tokens accepted + 1 bonus
    assert stats.tau == 5.0 and stats.non_chain_commits == 0



@pytest.mark.parametrize(("mode", "cache_implementation"), [
    ("hybrid", None), ("masked", None), ("hybrid", "static"), ("masked", "static")])
@pytest.mark.parametrize(("widths", "ranks"), [((3, 3, 3), (0, 1, 2)), ((4, 4, 4, 4), (1, 2, 3, 0, 2))])
def test_greedy_non_chain_paths_match_vanilla(widths, ranks, mode, cache_implementation):
    """Every round accepts a full-depth path through second/third/fourth children, with the real
    draft running: the cache gather, the tree mask and the node positions all decide the output."""
    ids, reference = _reference(41)
    target, draft = _steered(reference, widths, ranks)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=41, do_sample=False,
                          longspec_verify_attention=mode, cache_implementation=cache_implementation)
    assert torch.equal(out, reference)
    stats, depth = draft.last_stats, len(widths)
    assert stats.new_tokens == 41
    assert stats.histogram()[depth + 1] >= stats.rounds - 1  # only the last round may be cut by max_length
    assert stats.tau >= depth
    assert stats.non_chain_commits >= stats.rounds - 1 > 0


@pytest.mark.parametrize(("mode", "cache_implementation"), [
    ("hybrid", None), ("masked", None), ("hybrid", "static"), ("masked", "static")])
def test_reranked_leaves_match_vanilla_and_accept_more(mode, cache_implementation):
    """Re-ranked leaves (longspec_rerank_leaves) hang at any depth: the steered reference's second and third
    guesses near the root become leaves the paper's tree has no room for, rounds accept them (positions one
    below their parents, their ancestors' mask, their K/V gathered into the cache), and the output is
    vanilla's token for token, with more tokens per round than the same run nodes give without them."""
    ids, reference = _reference(41)
    taus = {}
    for rerank in (False, True):
        target, draft = _steered(reference, (1, 2, 2, 3), ranks=(0, 1, 0, 2, 0, 0))
        out = target.generate(ids, assistant_model=draft, max_new_tokens=41, do_sample=False, longspec_rerank_leaves=rerank,
                              longspec_verify_attention=mode, cache_implementation=cache_implementation)
        assert torch.equal(out, reference), rerank
        assert draft.last_stats.rerank_leaves is rerank
        taus[rerank] = draft.last_stats.tau
    assert taus[True] >= taus[False] + 0.5, taus  # 4.0 against 3.08


@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_returned_cache_equals_vanillas_after_non_chain_commits(cache_implementation):
    """The cache handed back (return_dict_in_generate) holds, layer by layer, the K/V vanilla's holds:
    every committed path was gathered in the right order, not only the emitted tokens."""
    ids, reference = _reference(30)
    target, draft = _steered(reference, (3, 3, 3), ranks=(0, 1, 2))
    kwargs = dict(max_new_tokens=30, do_sample=False, return_dict_in_generate=True,
                  cache_implementation=cache_implementation)
    vanilla = target.generate(ids, **kwargs)
    out = target.generate(ids, assistant_model=draft, **kwargs)
    assert torch.equal(out.sequences, vanilla.sequences) and draft.last_stats.non_chain_commits > 0
    mine, theirs = (o.cache if "cache" in o else o.past_key_values for o in (out, vanilla))
    length = reference.shape[1] - 1  # every token but the last one has been through the target
    assert int(mine.get_seq_length()) == int(theirs.get_seq_length()) == length
    for a, b in zip(mine.layers, theirs.layers):
        assert torch.allclose(a.keys[:, :, :length], b.keys[:, :, :length], atol=1e-5)
        assert torch.allclose(a.values[:, :, :length], b.values[:, :, :length], atol=1e-5)


def test_decoders_are_reused_across_calls_and_can_be_released():
    from hf_longspec.generation import release_decoders

    ids, reference = _reference(20)
    target, draft = _steered(reference, (3, 3, 3), ranks=(0, 1, 2))
    for _ in range(2):  # same shape bucket: the second call reuses the first call's buffers
        assert torch.equal(target.generate(ids, assistant_model=draft, max_new_tokens=20, do_sample=False), reference)
    assert release_decoders(draft) == 1 and release_decoders(draft) == 0
    assert torch.equal(target.generate(ids, assistant_model=draft, max_new_tokens=20, do_sample=False), reference)


class _StopAfter(StoppingCriteria):
    def __init__(self, length):
        self.length = length

    def __call__(self, input_ids, scores, **kwargs):
        return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.length, dtype=torch.bool)


def test_one_compiled_round_serves_every_cache_capacity_bucket(monkeypatch):
    """Ten prompt-length buckets (cache capacities 1k-10k) with compiled rounds: dynamo traces the round
    for the first bucket and once more, with the capacity dynamic, for the second; every later bucket
    reuses that, and every output equals vanilla's. Compiled static, each bucket recompiled and from
    the ninth on dynamo's recompile limit left rounds eager. (aot_eager: the CPU has no inductor
    build of this graph; on CUDA the default backend compiles.)"""
    from torch._dynamo.utils import counters

    compile = torch.compile
    monkeypatch.setattr(torch, "compile", lambda fn, **kwargs: compile(fn, backend="aot_eager", **kwargs))
    torch._dynamo.reset()
    ids = _prompt()
    reference = tiny_llama(initializer_range=0.3, max_positions=16384).generate(ids, max_new_tokens=12, do_sample=False)
    target, draft = _steered(reference, (3, 3, 3), ranks=(0, 1, 2), max_positions=16384)
    stop = StoppingCriteriaList([_StopAfter(ids.shape[1] + 12)])
    graphs = []
    for bucket in range(1, 11):  # max_length picks the capacity: bucket x 1024 rows
        out = target.generate(ids, assistant_model=draft, max_new_tokens=1024 * bucket - ids.shape[1] - 64,
                              stopping_criteria=stop, do_sample=False, longspec_compile=True)
        assert torch.equal(out, reference), bucket
        assert draft.last_stats.compiled and draft.last_stats.non_chain_commits > 0
        graphs.append(counters["stats"]["unique_graphs"])
    assert graphs[0] > 0 and graphs[-1] == graphs[1] == 2 * graphs[0], graphs  # nothing traced after bucket 2
    torch._dynamo.reset()


def test_the_decoder_pool_keeps_few_idle_shapes_and_frees_memory_when_building_runs_out(monkeypatch):
    """Every tree shape (or cache bucket, batch size) gets its own decoder with a full target cache. A
    caller cycling through many shapes must not keep them all: at most IDLE_DECODERS_KEPT stay, the
    least recently used go first; and if building a new one runs out of memory, every idle one goes."""
    from hf_longspec.generation import loop

    ids, reference = _reference(20)
    target, draft = _steered(reference, (3, 3, 3), ranks=(0, 1, 2))

    def pooled():
        return [d for pool in draft.__dict__.get("_longspec_decoders", {}).values() for d in pool]

    shapes = [[3, 3, 3], [2, 2, 2], [3, 3], [2, 2], [3], [2]]
    for widths in shapes:
        out = target.generate(ids, assistant_model=draft, max_new_tokens=20, do_sample=False, longspec_tree_widths=widths)
        assert torch.equal(out, reference)
        assert len(pooled()) <= loop.IDLE_DECODERS_KEPT
    kept = {d.layout.widths for d in pooled()}
    assert kept == {tuple(w) for w in shapes[-loop.IDLE_DECODERS_KEPT:]}  # the most recently used

    built = loop.LongSpecDecoder.__init__
    failures = []

    def out_of_memory_once(self, *args, **kwargs):
        if not failures:
            failures.append(len(pooled()))
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        built(self, *args, **kwargs)

    monkeypatch.setattr(loop.LongSpecDecoder, "__init__", out_of_memory_once)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=20, do_sample=False, longspec_tree_widths=[1, 1])
    assert torch.equal(out, reference)
    assert failures == [loop.IDLE_DECODERS_KEPT - 1] and [d.layout.widths for d in pooled()] == [(1, 1)]


def test_greedy_non_chain_paths_with_processors_match_vanilla():
    """Accepted multi-token paths under repetition penalty and no-repeat-ngram: the verifier must
    extend the processors' input ids along the path, node by node."""
    kwargs = dict(max_new_tokens=30, do_sample=False, repetition_penalty=1.3, no_repeat_ngram_size=3)
    ids, reference = _reference(**kwargs)
    target, draft = _steered(reference, (3, 3, 3), ranks=(2, 0, 1))
    assert torch.equal(target.generate(ids, assistant_model=draft, **kwargs), reference)
    stats = draft.last_stats
    assert stats.tau >= 3 and stats.non_chain_commits >= stats.rounds - 1 > 0


def test_eos_inside_an_accepted_path_stops_there():
    ids, full = _reference(30)
    free = full[0, ids.shape[1]:].tolist()
    eos = free[7]  # lands inside round 2's accepted path (token 1 from prefill, round 1 gives 2..5)
    target, draft = _steered(full, (3, 3, 3), ranks=(1, 2, 0))
    reference = target.generate(ids, max_new_tokens=30, do_sample=False, eos_token_id=eos, pad_token_id=eos)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=30, do_sample=False, eos_token_id=eos,
                          pad_token_id=eos, **MASKED)
    assert torch.equal(out, reference)
    assert out[0, -1].item() == eos and out.shape[1] == ids.shape[1] + free.index(eos) + 1
    if free.index(eos) == 7:
        assert draft.last_stats.histogram() == {4: 1, 3: 1} and draft.last_stats.non_chain_commits == 2


class StopAtLength(StoppingCriteria):
    def __init__(self, length):
        self.length = length

    def __call__(self, input_ids, scores, **kwargs):
        return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.length, dtype=torch.bool)


@pytest.mark.parametrize("mode", ["hybrid", "masked"])
def test_stopping_in_the_middle_of_a_path_and_max_new_tokens_exact(mode):
    """A custom criterion stops 3 tokens into round 2's 4-token accepted path: the output must be
    exactly vanilla's length (not one token late, not the whole path)."""
    ids, full = _reference(30)
    target, draft = _steered(full, (3, 3, 3), ranks=(0, 2, 1))
    stop = StoppingCriteriaList([StopAtLength(ids.shape[1] + 8)])
    reference = target.generate(ids, max_new_tokens=30, do_sample=False, stopping_criteria=stop)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=30, do_sample=False, stopping_criteria=stop,
                          return_dict_in_generate=True, longspec_verify_attention=mode)
    assert torch.equal(out.sequences, reference) and reference.shape[1] == ids.shape[1] + 8
    assert draft.last_stats.histogram() == {4: 1, 3: 1}  # round 2 was stopped inside its accepted path
    assert draft.last_stats.round_lengths == {0: [4, 3]}  # in order: round 1's whole path, then the cut one
    cache = out.cache if "cache" in out else out.past_key_values
    assert cache.get_seq_length() == reference.shape[1] - 1  # cropped to the emitted tokens
    for new in (1, 2, 6, 7, 8, 9):
        out = target.generate(ids, assistant_model=draft, max_new_tokens=new, do_sample=False,
                              longspec_verify_attention=mode)
        assert torch.equal(out, full[:, : ids.shape[1] + new])


class Collect(BaseStreamer):
    def __init__(self):
        self.puts, self.ended = [], False

    def put(self, value):
        self.puts.append(value.flatten().tolist())

    def end(self):
        self.ended = True


def test_streamer_scores_and_return_dict():
    kwargs = dict(max_new_tokens=12, do_sample=False, return_dict_in_generate=True, output_scores=True,
                  output_logits=True)
    ids, reference = _reference(**kwargs)
    target, draft = _steered(reference.sequences, (3, 3), ranks=(1, 2))
    streamer = Collect()
    out = target.generate(ids, assistant_model=draft, streamer=streamer, **kwargs, **MASKED)
    assert torch.equal(out.sequences, reference.sequences)
    assert draft.last_stats.tau >= 2.5 and draft.last_stats.non_chain_commits > 0
    assert len(out.scores) == len(reference.scores) == 12
    for mine, theirs in zip(out.scores, reference.scores):
        assert torch.allclose(mine, theirs, atol=1e-4)
    for mine, theirs in zip(out.logits, reference.logits):
        assert torch.allclose(mine, theirs, atol=1e-4)
    assert streamer.ended and streamer.puts[0] == ids[0].tolist()
    assert sum(streamer.puts[1:], []) == out.sequences[0, ids.shape[1]:].tolist()


def test_repetition_penalty_processor_is_applied_like_vanilla():
    target, draft = _target_and_draft()
    ids = _prompt()
    kwargs = dict(max_new_tokens=25, do_sample=False, repetition_penalty=1.3, no_repeat_ngram_size=3)
    assert torch.equal(target.generate(ids, assistant_model=draft, **kwargs, **MASKED), target.generate(ids, **kwargs))


def test_clear_errors_and_no_partial_state():
    target, draft = _target_and_draft()
    ids = _prompt()
    other = tiny_llama(seed=9, initializer_range=0.3)
    with pytest.raises(IncompatibleDraftError, match="bind it first"):
        other.generate(ids, assistant_model=draft, max_new_tokens=4)
    install = LongSpecDraftModel.from_target(other)  # `other` now routes LongSpec drafts
    with pytest.raises(IncompatibleDraftError, match="bound to another target"):
        other.generate(ids, assistant_model=draft, max_new_tokens=4)
    del install
    with pytest.raises(UnsupportedGenerationError, match="exceeds the target's max_position_embeddings"):
        target.generate(ids, assistant_model=draft, max_new_tokens=2048)
    with pytest.raises(UnsupportedGenerationError, match="Beam search"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, num_beams=2)
    with pytest.raises(UnsupportedGenerationError, match="batch size 2: LongSpec returns scores"):
        target.generate(ids.repeat(2, 1), assistant_model=draft, max_new_tokens=4, do_sample=True,
                        output_logits=True, return_dict_in_generate=True)
    with pytest.raises(UnsupportedGenerationError, match="left padding only"):
        mask = torch.ones_like(ids)
        mask[0, 5] = 0  # a hole, not left padding
        target.generate(ids, attention_mask=mask, assistant_model=draft, max_new_tokens=4)
    with pytest.raises(UnsupportedGenerationError, match="output_attentions"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, output_attentions=True,
                        return_dict_in_generate=True)
    with pytest.raises(UnsupportedGenerationError, match=r"longspec_rerank_leaves='yes'; allowed: True, False or None"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, longspec_rerank_leaves="yes")
    with pytest.raises(ValueError, match="tree_rerank_leaves must be True or False"):
        LongSpecDraftModel.from_target(target, tree_rerank_leaves=1)
    with pytest.raises(ValueError, match=r"cpu_tree_rerank_leaves must be None \(tree_rerank_leaves on a CPU too\), "
                                         "True or False, got 'no'"):
        LongSpecDraftModel.from_target(target, cpu_tree_rerank_leaves="no")
    # nothing was left half-done: same attention implementation, and a valid call still works
    assert target.config._attn_implementation == "longspec_hybrid"
    reference = target.generate(ids, max_new_tokens=6, do_sample=False)
    assert torch.equal(target.generate(ids, assistant_model=draft, max_new_tokens=6, do_sample=False), reference)
    # a target sharded after the draft was bound (so the draft's cross-attention is not) is refused up front
    target._tp_size = 2
    with pytest.raises(IncompatibleDraftError, match="tp_size=2 ranks but the draft was bound for 1"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4)
    target._tp_size = None
    # the target's vocabulary changed after binding
    target.resize_token_embeddings(100)
    with pytest.raises(IncompatibleDraftError, match="vocab size mismatch"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4)


def test_a_draft_reading_several_target_layers_generates_exactly_and_reads_each_layers_cache():
    """extra_target_layer_indices through generate(): non-chain paths every round, output identical to
    vanilla greedy, and the drafting step reads each extra layer's own committed cache (the decoder's
    buffers, holding what the target cached for that layer)."""
    ids, reference = _reference(41)
    target = tiny_llama(initializer_range=0.3)
    draft = SteeredDraft.from_target(target, sliding_window=16, tree_widths=[3, 3, 3], extra_target_layer_indices=[0])
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    draft.steer(reference, (0, 1, 2))
    seen = []
    original = draft.cross_attn.forward_step

    def spy(*args, **kwargs):
        seen.append(kwargs.get("extra_kv", args[8] if len(args) > 8 else ()))
        return original(*args, **kwargs)

    draft.cross_attn.forward_step = spy
    out = target.generate(ids, assistant_model=draft, max_new_tokens=41, do_sample=False)
    assert torch.equal(out, reference)
    assert draft.last_stats.non_chain_commits >= draft.last_stats.rounds - 1 > 0
    assert seen and all(len(extra) == 1 for extra in seen)
    keys, values = seen[-1][0]
    with torch.no_grad():
        cache = target(reference[:, :-1], use_cache=True).past_key_values
    length = reference.shape[1] - 1
    torch.testing.assert_close(keys[:, :, :length], cache.layers[0].keys)
    torch.testing.assert_close(values[:, :, :length], cache.layers[0].values)
    assert not torch.allclose(keys[:, :, :length], cache.layers[1].keys)

