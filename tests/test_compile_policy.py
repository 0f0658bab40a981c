"""longspec_compile="auto" (generation/compile_policy.py): when an uncompiled decoder starts compiling, on the real
embedded target. A file of its own so that pytest-xdist's per-file workers balance: test_generation_embedded.py is the
suite's longest file."""

import pytest
import torch

from hf_longspec.corpus import long_prompt_ids
from hf_longspec.demo import load_draft_for


def test_compile_auto_compiles_mid_call_once_its_rounds_have_paid_and_keeps_vanilla_s_tokens(embedded, monkeypatch):
    """longspec_compile="auto" (ski rental, generation/compile_policy.py): the decoder starts uncompiled and compiles
    once its rounds have lost what compiling costs. At the measured prices a short call never compiles; at a price
    of nothing the switch comes after the first timed round, in the middle of the call, and the rounds after it
    (the compiled functions, here torch.compile recorded and run eagerly on the CPU) keep vanilla greedy's tokens
    on real prose with the shipped draft, greedy and sampled (top_k=1, whose walk is swapped too); the next call
    reuses the compiled decoder. Anything but None, True,
    False and "auto" is refused before any forward runs (before, any truthy value compiled)."""
    from hf_longspec.errors import UnsupportedGenerationError
    from hf_longspec.generation import compile_policy, sampled_accept

    target, tokenizer = embedded
    draft, _ = load_draft_for(target, "embedded")
    ids = torch.tensor([long_prompt_ids(tokenizer, 512, kind="prose", split="eval", seed=5)])
    reference = target.generate(ids, max_new_tokens=32, do_sample=False)
    compiled = []

    def recording_compile(fn, **options):
        compiled.append(fn.__name__)
        return fn

    monkeypatch.setattr(torch, "compile", recording_compile)
    options = dict(max_new_tokens=32, do_sample=False, longspec_lookup_tokens=0, longspec_plain_steps=False,
                   longspec_tree_widths=(4, 16, 16))
    short = target.generate(ids, assistant_model=draft, longspec_compile="auto", **options)
    assert torch.equal(short, reference)
    stats = draft.last_stats
    assert stats.rounds >= 4 and not stats.compiled and not stats.compiled_during_call and compiled == []

    fresh, _ = load_draft_for(target, "embedded")
    monkeypatch.setattr(compile_policy, "COMPILE_ALL_SECONDS", 0.0)
    monkeypatch.setattr(compile_policy, "COMPILE_DRAFTING_SECONDS", 0.0)
    out = target.generate(ids, assistant_model=fresh, longspec_compile="auto", **options)
    assert torch.equal(out, reference)
    stats = fresh.last_stats
    assert stats.compiled and stats.compiled_during_call and stats.rounds >= 4
    assert "_verify_forward" in compiled and "_draft_greedy_eager" in compiled  # the verification too: SmolLM2
    (decoder,) = [d for pool in fresh.__dict__["_longspec_decoders"].values() for d in pool]
    assert decoder.rental is None and decoder.compiled
    calls = len(compiled)
    assert torch.equal(target.generate(ids, assistant_model=fresh, longspec_compile="auto", **options), reference)
    assert fresh.last_stats.compiled and not fresh.last_stats.compiled_during_call and len(compiled) == calls
    # a sampled call's device round swaps its drafting and its walk too (top_k=1 samples greedily: vanilla's tokens)
    monkeypatch.setattr(sampled_accept, "_compiled_walk", None)  # the module's compiled walk: restored after
    sampled = target.generate(ids, assistant_model=fresh, longspec_compile="auto", **{**options, "do_sample": True},
                              top_k=1)
    assert torch.equal(sampled, reference)
    assert fresh.last_stats.compiled_during_call and "_draft_sampled_eager" in compiled and "sample_accept" in compiled

    for wrong in ("yes", 1.5, "True"):
        with pytest.raises(UnsupportedGenerationError, match=r"longspec_compile=.*allowed: None .*True, False, or 'auto'"):
            target.generate(ids, assistant_model=fresh, longspec_compile=wrong, max_new_tokens=4, do_sample=False)
    # the ranks of a tensor-parallel target would each time their own rounds (generate passes whether the draft is
    # bound to one: loop.py)
    with pytest.raises(UnsupportedGenerationError, match="tensor-parallel target: each rank would decide"):
        compile_policy.check_compile_option("auto", tensor_parallel=True)
