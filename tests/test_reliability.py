"""Bad and unusual inputs: each gets vanilla generate()'s output or an error naming the value and
what is allowed, before anything expensive runs. docs/reliability.md lists every case with its test."""

import json
import re
import threading
from pathlib import Path

import pytest
import torch
from transformers import GenerationConfig, TrainerCallback
from transformers.generation.streamers import BaseStreamer

from conftest import ByteTokenizer, perturbed_pair, random_prompt, tiny_llama
from hf_longspec import IncompatibleDraftError, LongSpecDraftModel, LongSpecError, UnsupportedGenerationError, cli

ROOT = Path(__file__).resolve().parents[1]


def _target_and_draft(widths=(2, 3, 3), **target_kwargs):
    return perturbed_pair(widths, **target_kwargs)


def _prompt(length=30, vocab=96, seed=1):
    return random_prompt(length, vocab, seed)


@pytest.fixture(scope="module")
def pair():
    return _target_and_draft()


# ------------------------------------------------------------------------------------- generate()
@pytest.mark.parametrize("sampled", [False, True])
def test_a_round_whose_compile_fails_warns_and_runs_uncompiled_with_vanilla_s_tokens(monkeypatch, sampled):
    """torch.compile can fail on a user's machine (no C compiler, an op the compiler lacks): the first round then
    warns, drops every compiled piece (drafting, verification, the sampled walk) and runs uncompiled, and the output
    is still vanilla greedy's (sampled with top_k=1, which is greedy, through the device walk)."""
    from hf_longspec.generation import sampled_accept

    target, draft = _target_and_draft()
    ids = _prompt()
    reference = target.generate(ids, max_new_tokens=12, do_sample=False)

    def failing_compile(fn, **options):
        def compiled(*args, **kwargs):
            raise RuntimeError("no C compiler (simulated)")
        return compiled

    monkeypatch.setattr(torch, "compile", failing_compile)
    monkeypatch.setattr(sampled_accept, "_compiled_walk", None)  # module-level compiled wrappers: restored after
    options = {"do_sample": True, "top_k": 1} if sampled else {"do_sample": False}
    with pytest.warns(UserWarning, match="torch.compile of the LongSpec round failed"):
        out = target.generate(ids, assistant_model=draft, max_new_tokens=12, longspec_compile=True, **options)
    stats = draft.last_stats
    assert torch.equal(out, reference) and not stats.compiled and not stats.verify_compiled and not stats.host_walked


def test_concurrent_generate_calls_from_threads_match_vanilla():
    """4 threads share one target and draft; every call must equal vanilla greedy (today verification
    switches the model-wide attention implementation per call, so a concurrent call crashes)."""
    target, draft = _target_and_draft()
    prompts = [_prompt(20 + 3 * i, seed=i) for i in range(4)]
    references = [target.generate(p, max_new_tokens=8, do_sample=False) for p in prompts]
    failures, stop = [], threading.Event()
    start = threading.Barrier(4)

    def worker(k):
        start.wait()
        for j in range(40):  # 160 calls in all; stops early at the first failure
            if stop.is_set():
                return
            i = (j + k) % len(prompts)
            try:
                out = target.generate(prompts[i], assistant_model=draft, max_new_tokens=8, do_sample=False)
                if not torch.equal(out, references[i]):
                    failures.append(f"prompt {i}: output differs from vanilla")
            except Exception as error:  # noqa: BLE001 - recorded and asserted below
                failures.append(f"prompt {i}: {type(error).__name__}: {error}")
            if failures:
                stop.set()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures[:3]


def test_stop_strings_with_tokenizer_match_vanilla(embedded):
    target, tokenizer = embedded
    draft = LongSpecDraftModel.from_target(target, tree_widths=[2, 2])
    ids = tokenizer("The capital of France is Paris. The capital of Germany is", return_tensors="pt").input_ids
    common = dict(max_new_tokens=24, do_sample=False, tokenizer=tokenizer)
    reference = target.generate(ids, stop_strings=["."], **common)
    assert tokenizer.decode(reference[0, ids.shape[1]:]).endswith(".")  # the stop string did stop it
    assert torch.equal(target.generate(ids, stop_strings=["."], assistant_model=draft, **common), reference)
    # stop strings on a GenerationConfig object; the caller's object is left as it was
    config = GenerationConfig(max_new_tokens=24, do_sample=False, stop_strings=[" Berlin"])
    reference = target.generate(ids, generation_config=config, tokenizer=tokenizer)
    assert torch.equal(target.generate(ids, generation_config=config, tokenizer=tokenizer, assistant_model=draft),
                       reference)
    assert config.stop_strings == [" Berlin"]
    # without a tokenizer: transformers' own error, as without an assistant
    with pytest.raises(ValueError, match="tokenizer"):
        target.generate(ids, stop_strings=["."], max_new_tokens=4, assistant_model=draft)


def test_token_healing_with_tokenizer_matches_vanilla(embedded):
    """token_healing=True heals the prompt's last token with the tokenizer, which generate() drops on the
    custom_generate route (fifty-fourth session: the call failed with "you must pass the model's tokenizer"); the
    router heals it with generate()'s own heal_tokens, and the speculated call equals vanilla's."""
    target, tokenizer = embedded
    draft = LongSpecDraftModel.from_target(target, tree_widths=[2, 2])
    ids = tokenizer("The docs are at https://huggingface.co/docs/transformers/main/en/main_cl",
                    return_tensors="pt").input_ids
    common = dict(max_new_tokens=16, do_sample=False, tokenizer=tokenizer)
    reference = target.generate(ids, token_healing=True, **common)
    assert not torch.equal(reference, target.generate(ids, **common))  # healing changed this prompt's output
    assert torch.equal(target.generate(ids, token_healing=True, assistant_model=draft, **common), reference)
    assert draft.last_stats.rounds >= 1
    config = GenerationConfig(max_new_tokens=16, do_sample=False, token_healing=True)
    assert torch.equal(target.generate(ids, generation_config=config, tokenizer=tokenizer, assistant_model=draft),
                       reference)
    assert config.token_healing  # the caller's object is left as it was
    with pytest.raises(ValueError, match="token healing, you must pass the model's tokenizer"):  # as vanilla
        target.generate(ids, token_healing=True, max_new_tokens=4, assistant_model=draft)


def test_an_int32_prompt_comes_back_as_vanilla_s_int64_sequences(pair):
    """Vanilla appends int64 tokens to an int32 prompt, returning int64; LongSpec returned the prompt's int32
    (fifty-fourth session's probe), equal values of another dtype."""
    target, draft = pair
    ids = _prompt().to(torch.int32)
    reference = target.generate(ids, max_new_tokens=8, do_sample=False)
    for options in ({}, {"return_dict_in_generate": True, "output_scores": True}):
        out = target.generate(ids, assistant_model=draft, max_new_tokens=8, do_sample=False, **options)
        sequences = out.sequences if options else out
        assert sequences.dtype == reference.dtype == torch.int64 and torch.equal(sequences, reference)


def test_prompt_containing_pad_token_without_mask_matches_vanilla(pair):
    """generate() infers a mask with a 0 wherever the prompt holds pad_token_id (pad != eos) and
    masks that token; LongSpec cannot, so it runs the call unspeculated: same output, and a warning."""
    target, draft = pair
    ids = _prompt()
    pad = int(ids[0, 5])
    reference = target.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=pad)
    with pytest.warns(UserWarning, match=rf"pad_token_id={pad}.*attention_mask=torch.ones_like"):
        out = target.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=pad, assistant_model=draft)
    assert torch.equal(out, reference)
    assert draft.last_stats.rounds == 0 and draft.last_stats.new_tokens == 10
    # an explicit all-ones mask says "no padding": speculated, equal to vanilla with that mask
    ones = torch.ones_like(ids)
    reference = target.generate(ids, attention_mask=ones, max_new_tokens=10, do_sample=False, pad_token_id=pad)
    out = target.generate(ids, attention_mask=ones, max_new_tokens=10, do_sample=False, pad_token_id=pad,
                          assistant_model=draft)
    assert torch.equal(out, reference) and draft.last_stats.rounds >= 1
    # a mask with zeros that are not left padding is refused, naming what is allowed
    mask = ones.clone()
    mask[0, 3:6] = 0
    with pytest.raises(UnsupportedGenerationError, match=r"3 masked \(0\) position\(s\).*Allowed: no attention_mask"):
        target.generate(ids, attention_mask=mask, max_new_tokens=4, assistant_model=draft)


@pytest.mark.parametrize(("options", "message"), [
    ({"longspec_tree_widths": [-3]}, r"longspec_tree_widths=\[-3\] has a width -3 that is not a positive int"),
    ({"longspec_tree_widths": []}, r"longspec_tree_widths=\[\]; allowed: a non-empty list of positive ints"),
    ({"longspec_tree_widths": [4, 0, 2]}, r"width 0 that is not a positive int"),
    ({"longspec_tree_widths": [2.5]}, r"width 2.5 that is not a positive int"),
    ({"longspec_tree_widths": 4}, r"longspec_tree_widths=4; allowed: a non-empty list"),
    ({"longspec_max_nodes": 0}, r"longspec_max_nodes=0; allowed: a positive int .* or None"),
    ({"longspec_max_nodes": -1}, r"longspec_max_nodes=-1; allowed"),
])
def test_tree_option_values_are_refused(pair, options, message):
    target, draft = pair
    with pytest.raises(UnsupportedGenerationError, match=message):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, **options)


@pytest.mark.parametrize("options", [{"longspec_cuda_graphs": "no"}, {"longspec_cuda_graphs": None},
                                     {"longspec_compile": "no"}])
def test_switches_that_are_not_bools_are_refused_before_anything_runs(options):
    """A switch given a string ran as its truthiness (fifty-first session: longspec_cuda_graphs="no" captured graphs
    on CUDA); each is refused by name with what is allowed, and no call runs (no stats)."""
    target, draft = _target_and_draft()
    (name, value), = options.items()
    with pytest.raises(UnsupportedGenerationError, match=rf"^{name}={re.escape(repr(value))}; allowed: "):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, do_sample=False, **options)
    assert getattr(draft, "last_stats", None) is None


@pytest.mark.parametrize(("options", "message"), [
    ({"prompt_lookup_num_tokens": 10}, r"^prompt_lookup_num_tokens=10 asks generate\(\) for another kind of speculation"
                                       r".*allowed: prompt_lookup_num_tokens=None with a LongSpec draft \(its own "
                                       r"prompt-lookup chain is longspec_lookup_tokens=K"),
    ({"assistant_early_exit": 2}, r"^assistant_early_exit=2 asks generate\(\) for another kind of speculation"),
])
def test_another_speculation_method_asked_beside_the_draft_is_refused(options, message):
    """prompt_lookup_num_tokens or assistant_early_exit beside a LongSpec draft ran LongSpec and dropped them silently
    (fifty-first session); now refused by name, pointing at LongSpec's own chain, before anything runs."""
    target, draft = _target_and_draft()
    with pytest.raises(UnsupportedGenerationError, match=message):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, do_sample=False, **options)
    assert getattr(draft, "last_stats", None) is None


@pytest.mark.parametrize(("options", "message"), [
    ({"penalty_alpha": 0.6, "top_k": 4}, r"^penalty_alpha=0\.6, top_k=4 ask generate\(\) for contrastive_search"),
    ({"dola_layers": "low"}, r"^dola_layers='low' asks generate\(\) for dola_generation"),
    ({"force_words_ids": [[42]]}, r"^force_words_ids=\[\[42\]\] asks generate\(\) for constrained_beam_search"),
    ({"constraints": []}, r"^constraints=\[\] asks generate\(\) for constrained_beam_search"),
    ({"use_mtp": True}, r"^use_mtp=True asks generate\(\) for assisted_generation"),
])
def test_another_decoding_method_asked_beside_the_draft_is_refused(options, message):
    """Contrastive search, DoLa, constrained beam search and multi-token prediction beside a LongSpec draft ran plain
    greedy LongSpec and dropped the options silently (fifty-second session; vanilla generate() runs them or says
    why not): transformers' own get_generation_mode names the method asked for, and the call is refused with what a
    draft allows, before anything runs. penalty_alpha with top_k=1 is greedy search for transformers too, and runs."""
    target, draft = _target_and_draft()
    with pytest.raises(UnsupportedGenerationError, match=message + r".*allowed with a LongSpec draft: greedy search "
                                                         r"\(do_sample=False\) or sampling \(do_sample=True\)"):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, do_sample=False, **options)
    assert getattr(draft, "last_stats", None) is None
    out = target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, do_sample=False, penalty_alpha=0.6,
                          top_k=1)
    assert torch.equal(out, target.generate(_prompt(), max_new_tokens=4, do_sample=False))


@pytest.mark.parametrize("asked", ["guidance_scale", "SynthID", "processor passed in"])
def test_a_logits_processor_that_needs_one_call_per_token_is_refused_before_anything_runs(asked):
    """Classifier-free guidance (guidance_scale != 1) runs the target on the unconditional prompt one new token at a
    time in a cache of its own; SynthID watermarking keeps the contexts it has seen. A round calls the processors
    once per drafted node, so both gave other tokens than vanilla on the embedded target (fifty-fourth session).
    Refused, naming what is allowed; guidance_scale=1 and the hash-based WatermarkingConfig run, = vanilla."""
    from transformers import LogitsProcessorList, SynthIDTextWatermarkingConfig, WatermarkingConfig
    from transformers.generation.logits_process import UnbatchedClassifierFreeGuidanceLogitsProcessor

    target, draft = _target_and_draft()
    options, message = {
        "guidance_scale": ({"guidance_scale": 1.5, "negative_prompt_ids": _prompt(length=5, seed=3)},
                           r"^UnbatchedClassifierFreeGuidanceLogitsProcessor \(guidance_scale other than 1.*allowed "
                           r"with a LongSpec draft: guidance_scale=None or 1, or generate\(\) without the draft"),
        "SynthID": ({"watermarking_config": SynthIDTextWatermarkingConfig(keys=[654, 400, 836, 123], ngram_len=3)},
                    r"^SynthIDTextWatermarkLogitsProcessor \(watermarking_config=SynthIDTextWatermarkingConfig.*"
                    r"keeps the contexts it has seen.*allowed with a LongSpec draft: watermarking_config=None or a "
                    r"WatermarkingConfig"),
        "processor passed in": ({"logits_processor": LogitsProcessorList(
            [UnbatchedClassifierFreeGuidanceLogitsProcessor(1.5, target)])},
            r"^UnbatchedClassifierFreeGuidanceLogitsProcessor \(.*, or passed in logits_processor\)"),
    }[asked]
    with pytest.raises(UnsupportedGenerationError, match=message):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, do_sample=False, **options)
    assert getattr(draft, "last_stats", None) is None
    for allowed in ({"guidance_scale": 1.0}, {"watermarking_config": WatermarkingConfig(bias=2.5)}):
        out = target.generate(_prompt(), assistant_model=draft, max_new_tokens=8, do_sample=False, **allowed)
        assert torch.equal(out, target.generate(_prompt(), max_new_tokens=8, do_sample=False, **allowed))


@pytest.mark.parametrize("case", ["offloaded", "quantized", "offloading DynamicCache", "QuantizedCache"])
def test_a_cache_that_offloads_or_quantizes_the_kv_is_refused_with_what_is_allowed(case):
    """cache_implementation="offloaded" or "quantized" (or such a cache passed in) asks generate() to keep the KV off
    the device or quantized, to save device memory. A LongSpec call ran anyway (fifty-second session), verifying in its
    own full-precision cache on the device and writing raw K/V into the layers of a QuantizedCache passed in: the memory
    asked for was not saved, and nothing said so. Now refused before any forward runs, naming what is allowed."""
    from transformers.cache_utils import DynamicCache, QuantizedCache

    target, draft = _target_and_draft()
    kind = "offloaded" if "offload" in case else "quantized"
    if kind == "quantized":  # the fp8 backend needs no extra package, and transformers 5.17 lacks it
        try:
            QuantizedCache("fp8", target.config)
        except ValueError as error:
            pytest.skip(f"no fp8 KV cache quantization in this transformers: {error}")
    options = {"offloaded": lambda: {"cache_implementation": "offloaded"},
               "quantized": lambda: {"cache_implementation": "quantized", "cache_config": {"backend": "fp8"}},
               "offloading DynamicCache": lambda: {"past_key_values": DynamicCache(config=target.config,
                                                                                   offloading=True)},
               "QuantizedCache": lambda: {"past_key_values": QuantizedCache("fp8", target.config)}}[case]()
    with pytest.raises(UnsupportedGenerationError, match=rf"^generate\(\) prepared an? {kind} KV cache .*allowed: "
                                                         r"cache_implementation None, 'dynamic' or 'static'"):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, do_sample=False, **options)
    assert getattr(draft, "last_stats", None) is None


@pytest.mark.parametrize("with_ids", [True, False])
def test_inputs_embeds_are_refused_since_the_prefill_reads_token_ids(with_ids):
    """inputs_embeds beside input_ids (soft prompts, multimodal embeddings) made vanilla's prompt forward read the
    embeddings, while a LongSpec call prefilled from the ids and emitted other tokens, silently (fifty-second session:
    on this tiny target, embeddings that are the tokens' own plus noise changed all six tokens); inputs_embeds alone
    failed with "The cache already holds 0 tokens for a 0-token input". Both are refused by name before any forward."""
    target, draft = _target_and_draft()
    ids = _prompt()
    embeds = target.get_input_embeddings()(ids)
    embeds = embeds + 3 * embeds.std() * torch.randn(embeds.shape, generator=torch.Generator().manual_seed(5))
    inputs = {"input_ids": ids, "inputs_embeds": embeds} if with_ids else {"inputs_embeds": embeds}
    vanilla = target.generate(**inputs, max_new_tokens=6, do_sample=False)
    assert not torch.equal(vanilla[:, -6:], target.generate(ids, max_new_tokens=6, do_sample=False)[:, -6:])
    with pytest.raises(UnsupportedGenerationError, match=r"^inputs_embeds: a LongSpec call prefills the prompt from "
                                                         r"its token ids.*allowed: input_ids without inputs_embeds"):
        target.generate(**inputs, assistant_model=draft, max_new_tokens=6, do_sample=False)
    assert getattr(draft, "last_stats", None) is None


def test_arguments_the_route_sets_itself_are_refused_with_the_generate_argument_to_use():
    """longspec_streamer=... beside assistant_model=draft collided with the route's own ("got multiple values",
    fifty-first session) and longspec_return_cache=... was replaced silently; each is refused naming generate()'s own
    argument."""
    from transformers import TextStreamer

    target, draft = _target_and_draft()
    with pytest.raises(UnsupportedGenerationError, match=r"^longspec_streamer: set by generate\(\) itself .*allowed: "
                                                         r"streamer=\.\.\."):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, longspec_streamer=TextStreamer(None))
    with pytest.raises(UnsupportedGenerationError, match=r"^longspec_return_cache: .*allowed: past_key_values="):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, longspec_return_cache=True)
    assert getattr(draft, "last_stats", None) is None


def test_tree_options_on_a_generation_config_and_the_custom_generate_route(pair):
    from hf_longspec.generation import longspec_generate

    target, draft = pair
    config = GenerationConfig(max_new_tokens=4, do_sample=False, longspec_max_nodes=0)
    with pytest.raises(UnsupportedGenerationError, match=r"generation_config.longspec_max_nodes=0"):
        target.generate(_prompt(), assistant_model=draft, generation_config=config)
    with pytest.raises(UnsupportedGenerationError, match=r"longspec_tree_widths=\[-3\]"):
        target.generate(_prompt(), custom_generate=longspec_generate, longspec_draft=draft, max_new_tokens=4,
                        longspec_tree_widths=[-3])
    from hf_longspec.tree_options import check_tree_options

    check_tree_options([4, 16, 16], None)  # the defaults' shape passes
    check_tree_options(None, 8)
    with pytest.raises(UnsupportedGenerationError, match="True"):
        check_tree_options([True], None)  # a bool is not a width


def test_num_return_sequences_samples_each_prompt_that_many_times_like_vanilla(pair):
    """Sampling with num_return_sequences=N gives N draws per prompt, as vanilla does (refused until the
    fifty-fourth session): generate() repeats each prompt N times before the LongSpec call, so its rows are a
    batch whose rows draw on their own (test_sampling's laws run through this route). Greedy with N > 1 gets
    vanilla's own refusal."""
    target, draft = pair
    ids = _prompt()
    reference = target.generate(ids, max_new_tokens=12, do_sample=False)
    out = target.generate(ids, assistant_model=draft, max_new_tokens=12, do_sample=True, top_k=1,
                          num_return_sequences=3)  # top_k=1 samples greedily: three copies of vanilla's tokens
    assert torch.equal(out, reference.expand(3, -1))
    torch.manual_seed(5)
    drawn = target.generate(ids, assistant_model=draft, max_new_tokens=12, do_sample=True, num_return_sequences=4)
    torch.manual_seed(5)
    repeated = target.generate(ids.expand(4, -1), assistant_model=draft, max_new_tokens=12, do_sample=True)
    assert torch.equal(drawn, repeated) and len({tuple(row.tolist()) for row in drawn[:, ids.shape[1]:]}) > 1
    two = torch.cat([ids, _prompt(seed=2)])
    torch.manual_seed(6)
    rows = target.generate(two, assistant_model=draft, max_new_tokens=12, do_sample=True, num_return_sequences=2)
    assert torch.equal(rows[:, :ids.shape[1]], two.repeat_interleave(2, dim=0))  # vanilla's order: prompt by prompt
    with pytest.raises(ValueError, match=r"do not support `num_return_sequences` different than 1 \(got 2\)"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, do_sample=False, num_return_sequences=2)
    with pytest.raises(UnsupportedGenerationError, match=r"^batch size 2 \(1 prompt\(s\) x num_return_sequences=2\): "
                                                         r"LongSpec returns scores and logits"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4, do_sample=True, num_return_sequences=2,
                        output_scores=True, return_dict_in_generate=True)


def test_synced_gpus_is_refused_not_dropped(pair):
    """generate() drops synced_gpus on the custom_generate route; LongSpec must not ignore it silently."""
    target, draft = pair
    message = r"synced_gpus=True .* not supported.*allowed: synced_gpus=False"
    with pytest.raises(UnsupportedGenerationError, match=message):
        target.generate(_prompt(), assistant_model=draft, max_new_tokens=4, synced_gpus=True)


class Record(BaseStreamer):
    def __init__(self):
        self.shapes = []

    def put(self, value):
        self.shapes.append(tuple(value.shape))

    def end(self):
        pass


def test_streamer_receives_the_same_shapes_as_stock_generate(pair):
    target, draft = pair
    ids = _prompt()
    stock, mine = Record(), Record()
    target.generate(ids, max_new_tokens=6, do_sample=False, streamer=stock)
    target.generate(ids, max_new_tokens=6, do_sample=False, streamer=mine, assistant_model=draft)
    assert stock.shapes == [(1, ids.shape[1])] + [(1,)] * 6
    assert mine.shapes == stock.shapes


def _unusual_calls(target):
    ids = _prompt()
    first = int(target.generate(ids, max_new_tokens=1, do_sample=False)[0, -1])
    return {
        "max_new_tokens=1": (ids, dict(max_new_tokens=1)),
        "one-token prompt": (ids[:, :1], dict(max_new_tokens=12)),
        "eos is the first generated token": (ids, dict(max_new_tokens=12, eos_token_id=first, pad_token_id=first)),
        "eos set, pad_token_id unset": (ids, dict(max_new_tokens=12, eos_token_id=first)),
        "GenerationConfig object": (ids, dict(generation_config=GenerationConfig(max_new_tokens=12, do_sample=False))),
        "max_length instead of max_new_tokens": (ids, dict(max_length=ids.shape[1] + 9)),
        "input_ids= keyword, explicit all-ones mask": (None, dict(input_ids=ids, attention_mask=torch.ones_like(ids),
                                                                  max_new_tokens=12)),
        "min_new_tokens with an eos": (ids, dict(max_new_tokens=12, min_new_tokens=6, eos_token_id=first)),
    }


@pytest.mark.parametrize("case", list(_unusual_calls(tiny_llama(initializer_range=0.3))))
def test_unusual_but_valid_calls_match_vanilla(pair, case):
    target, draft = pair
    ids, kwargs = _unusual_calls(target)[case]
    if "generation_config" not in kwargs:
        kwargs = {"do_sample": False, **kwargs}
    reference = target.generate(ids, **kwargs)
    assert torch.equal(target.generate(ids, assistant_model=draft, **kwargs), reference)
    if case == "eos is the first generated token":
        assert reference.shape[1] == ids.shape[1] + 1


# ------------------------------------------------------------------------------------- the draft
def test_bind_refuses_a_draft_on_another_device():
    target = tiny_llama()
    draft = LongSpecDraftModel.from_target(target).to(torch.device("meta"))
    with pytest.raises(IncompatibleDraftError, match=r"draft's weights are on meta.*target's embeddings are on cpu"):
        draft.bind(target)


def test_from_pretrained_refuses_a_folder_that_is_not_a_draft(tmp_path):
    tiny_llama().save_pretrained(tmp_path / "llama")
    with pytest.raises(LongSpecError, match=r"llama: the config has model_type='llama'.*not a LongSpec draft") as info:
        LongSpecDraftModel.from_pretrained(tmp_path / "llama")
    from hf_longspec.errors import NotADraftError

    assert isinstance(info.value, NotADraftError)


# ------------------------------------------------------------------------------------- command line
@pytest.fixture
def no_loading(monkeypatch):
    """Any model load fails the test: refusals must come before loading."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the arguments were checked")

    import hf_longspec.bench.harness as harness
    import hf_longspec.demo as demo

    monkeypatch.setattr(cli, "_load_target", refuse)
    monkeypatch.setattr(demo, "load_embedded_target", refuse)
    monkeypatch.setattr(harness, "load_target", refuse)


def _cli_error(capsys, argv):
    assert cli.main(argv) == 2
    return capsys.readouterr().err


def test_cli_refuses_bad_draft_and_target_paths_before_loading(tmp_path, capsys, no_loading):
    missing = str(tmp_path / "nope")
    err = _cli_error(capsys, ["run", "--draft", missing])
    assert f"--draft {missing}: no such folder" in err and "'embedded'" in err and "Traceback" not in err
    tiny_llama().save_pretrained(tmp_path / "llama")
    err = _cli_error(capsys, ["run", "--draft", str(tmp_path / "llama")])
    assert "model_type='llama', not a LongSpec draft ('longspec_draft')" in err
    err = _cli_error(capsys, ["bench", "--draft", missing, "--output", str(tmp_path / "b")])
    assert "no such folder" in err
    err = _cli_error(capsys, ["train", "--output", str(tmp_path / "t"), "--target", missing])
    assert f"--target {missing}: no such folder" in err and "local model folder" in err
    err = _cli_error(capsys, ["train", "--output", str(tmp_path / "t"), "--init-draft", missing])
    assert f"--init-draft {missing}: no such folder" in err and "'embedded'" in err
    assert not (tmp_path / "t").exists()
    for bad in ("-1", "33"):
        err = _cli_error(capsys, ["run", "--lookup-tokens", bad])
        assert f"--lookup-tokens {bad}: allowed: an int from 0 to 32" in err and "Traceback" not in err
    err = _cli_error(capsys, ["run", "--cross-attention-window", "-1"])
    assert "--cross-attention-window -1: allowed: an int >= 1 (the newest entries read besides the anchors) or 0 " \
        "(every entry)." in err and "Traceback" not in err
    err = _cli_error(capsys, ["run", "--tree-widths", "2", "0"])
    assert "--tree-widths=[2, 0] has a width 0 that is not a positive int; allowed: a non-empty list of positive ints" \
        in err and "Traceback" not in err


@pytest.mark.parametrize("command", [["run"], ["bench", "--output", "unused"], ["train", "--output", "unused"]])
def test_cli_refuses_a_device_it_cannot_use_before_loading(capsys, no_loading, command):
    """--device foo (a name torch does not know) or a CUDA device this machine lacks gave a traceback (fifty-first
    session: "Torch not compiled with CUDA enabled" from `hf-longspec run --device cuda` on the CPU machine); now each
    command exits 2 naming the device and what is allowed, before loading anything."""
    err = _cli_error(capsys, [*command, "--device", "foo"])
    assert "--device foo: not a device torch can name; allowed: cpu, cuda or cuda:N" in err and "Traceback" not in err
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = "cuda" if count == 0 else f"cuda:{count}"
    err = _cli_error(capsys, [*command, "--device", missing])
    assert f"--device {missing}: this machine has " in err and "allowed: " in err and "Traceback" not in err
    assert not Path("unused").exists()


def test_a_cross_attention_window_asked_of_generate_is_refused_by_name_before_anything_runs():
    """longspec_cross_attention_window (per call, or in the generation config) must be an int >= 0; a draft config
    whose window was set to something else after it was built is refused by name too. Nothing is left behind."""
    target, draft = perturbed_pair()
    ids = random_prompt()
    allowed = r"allowed: an int W >= 1 \(the draft reads the target cache's 4 first entries and its newest W\), "
    for bad in (-1, True, 2.5, "64"):
        with pytest.raises(UnsupportedGenerationError,
                           match=rf"^longspec_cross_attention_window={re.escape(repr(bad))}; {allowed}0 \(every entry\)"):
            target.generate(ids, assistant_model=draft, max_new_tokens=4, longspec_cross_attention_window=bad)
    config = GenerationConfig(max_new_tokens=4, do_sample=False, longspec_cross_attention_window=-3)
    with pytest.raises(UnsupportedGenerationError, match=r"^generation_config.longspec_cross_attention_window=-3"):
        target.generate(ids, assistant_model=draft, generation_config=config)
    draft.config.cross_attention_window = 0
    with pytest.raises(UnsupportedGenerationError,
                       match=rf"^the draft config's cross_attention_window=0; {allowed}or None \(every entry\)"):
        target.generate(ids, assistant_model=draft, max_new_tokens=4)
    assert getattr(draft, "last_stats", None) is None and not draft.__dict__.get("_longspec_decoders")


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-tokens", "10", "--seq-len", "64"], "max_tokens=10 is less than seq_len=64"),
    (["--max-steps", "0"], r"max_steps=0; allowed: a positive int"),
    (["--batch-size", "0"], r"batch_size=0; allowed: a positive int"),
    (["--resume", "--overwrite-output"], "contradict"),
    (["--extra-target-layer-indices", "4", "4"], r"draft_overrides: extra_target_layer_indices must be a list of distinct ints"),
    (["--target-layer-index", "4", "--extra-target-layer-indices", "4"], r"target layers \[4, 4\] .* one of them twice"),
    (["--target-entry-input", "--extra-target-layer-indices", "4"], "cannot be combined with target_entry_input"),
    (["--lookup-tokens", "33"], r"draft_overrides: lookup_tokens must be an int from 0 to 32"),
    (["--noise-shift-weights", "0", "0"], r"noise_shift_weights=\[0.0, 0.0\]; allowed: None"),
    (["--no-noisy", "--noise-shift-weights", "1"], r"noise_shift_weights=\[1.0\] with noisy=False"),
    # fifty-first session: a bad mix gave a traceback, and negative epochs "no local text for the corpus mix", both
    # after the target had loaded
    (["--corpus-mix", "bogus"], r"corpus_mix='bogus': bad corpus mix item 'bogus': use a preset \('wide', 'chat'\)"),
    (["--corpus-mix", "code=-1"], r"corpus_mix='code=-1': corpus mix weights must be >= 0 and not all 0"),
    (["--corpus-mix", "code=abc"], r"bad corpus mix weight 'code=abc': allowed: name=weight with a number >= 0"),
    (["--corpus-max-epochs", "-1"], r"corpus_max_epochs=-1.0; allowed: a number > 0"),
])
def test_cli_train_refuses_bad_settings_before_loading(tmp_path, capsys, no_loading, argv, message):
    err = _cli_error(capsys, ["train", "--output", str(tmp_path / "run"), *argv])
    assert re.search(message, err), err


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-files", "-3"], "--max-files -3: allowed: an int >= 1."),  # before: every file but the last 3, silently
    (["--max-files", "0"], "--max-files 0: allowed: an int >= 1."),  # before: an empty report
    (["--max-tokens", "0", "--tokens"], "--max-tokens 0: allowed: an int >= 1."),
    (["--corpus-max-epochs", "0"], "--corpus-max-epochs 0.0: allowed: a number > 0."),
    (["--corpus-mix", "bogus"], "--corpus-mix 'bogus': bad corpus mix item 'bogus'"),  # before: a traceback
])
def test_cli_corpus_refuses_bad_settings_before_reading(capsys, no_loading, monkeypatch, argv, message):
    """`hf-longspec corpus` names the bad argument and what is allowed, exit 2, before reading any file."""
    import hf_longspec.corpus as corpus

    def no_reading(*args, **kwargs):
        raise AssertionError("the corpus was read before the arguments were checked")

    monkeypatch.setattr(corpus, "corpus_report", no_reading)
    err = _cli_error(capsys, ["corpus", *argv])
    assert message in err and "Traceback" not in err, err


def test_cli_train_refuses_a_non_empty_output_folder(tmp_path, capsys, no_loading):
    run = tmp_path / "run"
    (run / "checkpoint-500").mkdir(parents=True)
    (run / "final").mkdir()
    err = _cli_error(capsys, ["train", "--output", str(run)])
    assert f"output folder {run} is not empty (it holds checkpoint-500, final)" in err
    assert "--resume" in err and "--overwrite-output" in err
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint-500", "final"]
    # --resume needs a checkpoint to continue from when the folder is not empty
    (run / "checkpoint-500").rmdir()
    err = _cli_error(capsys, ["train", "--output", str(run), "--resume"])
    assert "holds no checkpoint-* to continue from (it holds final)" in err


def test_local_text_chunks_name_the_token_budget():
    from hf_longspec.training.data import LocalTextChunks

    with pytest.raises(ValueError, match="max_tokens=10 is less than seq_len=64") as info:
        LocalTextChunks(ByteTokenizer(), seq_len=64, max_tokens=10, kinds=("prose",))
    from hf_longspec.errors import TrainingRecipeError

    assert isinstance(info.value, TrainingRecipeError)


def test_bench_takes_output_like_train_and_keeps_out():
    parser = cli.build_parser()
    assert parser.parse_args(["bench", "--output", "a"]).output == "a"
    assert parser.parse_args(["bench", "--out", "b"]).output == "b"
    assert parser.parse_args(["train", "--output", "c"]).output == "c"


# ------------------------------------------------------------------------------------- training
def _recipe(output_dir, **overrides):
    from hf_longspec.training.run import TrainRecipe

    settings = dict(output_dir=str(output_dir), max_steps=6, seq_len=64, batch_size=4, learning_rate=1e-2,
                    warmup_steps=0, max_tokens=640, save_steps=2, logging_steps=1, distill="argmax",
                    kinds=["prose"], draft_overrides={"sliding_window": 32})
    return TrainRecipe(**{**settings, **overrides})


@pytest.fixture(scope="module")
def train_setup():
    from hf_longspec.training.run import build_dataset

    target = tiny_llama(vocab_size=257, hidden_size=64, layers=2, max_positions=1024, initializer_range=0.2)
    return target, build_dataset(ByteTokenizer(), _recipe("unused"))  # 10 chunks: 3 batches an epoch


class StopAt(TrainerCallback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True


def _weights(draft):
    return {name: value.detach().clone() for name, value in draft.state_dict().items()}


def test_seed_makes_training_reproducible_and_resume_matches(tmp_path, train_setup):
    from hf_longspec.training.run import train_draft

    target, dataset = train_setup
    first = _weights(train_draft(target, ByteTokenizer(), _recipe(tmp_path / "a"), progress=False, dataset=dataset))
    torch.randn(100)  # the global generator's state must not matter
    second = _weights(train_draft(target, ByteTokenizer(), _recipe(tmp_path / "b"), progress=False, dataset=dataset))
    assert all(torch.equal(first[name], second[name]) for name in first)  # bit for bit on the CPU
    other = _weights(train_draft(target, ByteTokenizer(), _recipe(tmp_path / "c", seed=1, max_steps=1),
                                 progress=False, dataset=dataset))
    assert not all(torch.equal(first[name], other[name]) for name in first)
    # interrupted after step 4 (inside the second epoch), then resumed to step 6
    train_draft(target, ByteTokenizer(), _recipe(tmp_path / "r"), progress=False, dataset=dataset,
                callbacks=[StopAt(4)])
    assert (tmp_path / "r" / "checkpoint-4").is_dir()
    resumed = _weights(train_draft(target, ByteTokenizer(), _recipe(tmp_path / "r", resume=True), progress=False,
                                   dataset=dataset))
    for name in first:
        torch.testing.assert_close(resumed[name], first[name], rtol=1e-5, atol=1e-6)


def test_overwrite_output_replaces_the_earlier_run_only(tmp_path, train_setup):
    from hf_longspec.training.run import train_draft

    target, dataset = train_setup
    run = tmp_path / "run"
    (run / "checkpoint-500").mkdir(parents=True)
    (run / "final").mkdir()
    (run / "final" / "stale.txt").write_text("old")
    (run / "notes.txt").write_text("mine")
    with pytest.raises(LongSpecError, match="is not empty"):
        train_draft(target, ByteTokenizer(), _recipe(run, max_steps=1), progress=False, dataset=dataset)
    train_draft(target, ByteTokenizer(), _recipe(run, max_steps=1, save_steps=100, overwrite_output=True),
                progress=False, dataset=dataset)
    names = sorted(p.name for p in run.iterdir())
    assert "checkpoint-500" not in names and {"final", "notes.txt"} <= set(names)  # the old run is gone, notes stay
    assert (run / "final" / "model.safetensors").exists() and not (run / "final" / "stale.txt").exists()
    recipe = json.loads((run / "final" / "training_recipe.json").read_text())
    assert recipe["overwrite_output"] is True


# ------------------------------------------------------------------------------------- the docs
def test_every_row_of_the_reliability_doc_names_an_existing_test():
    doc = (ROOT / "docs" / "reliability.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| ") and not line.startswith("| input")
            and not set(line) <= set("|- ")]
    assert len(rows) >= 20
    tests = {path.stem: path.read_text() for path in (ROOT / "tests").glob("test_*.py")}
    for row in rows:
        named = re.findall(r"`(test_\w+)::(test_\w+)", row)
        assert named, f"row without a test: {row}"
        for module, test in named:
            assert f"def {test}(" in tests.get(module, ""), f"{module}::{test} named in docs/reliability.md is missing"
