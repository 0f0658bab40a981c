"""The draft as a Hugging Face model: shapes, save/load, ring buffer, cross-attention, errors."""

import copy

import pytest
import torch
from transformers import AutoConfig, AutoModel, GPT2Config, GPT2LMHeadModel

from conftest import tiny_llama
from hf_longspec import (
    IncompatibleDraftError,
    LongSpecDraftConfig,
    LongSpecDraftModel,
    UnboundDraftError,
    UnsupportedTargetError,
)
from hf_longspec.draft_state import DraftStepContext
from hf_longspec.target_support import target_layer_kv, target_layers_kv


@torch.no_grad()
def _target_kv(target, ids, layer):
    out = target(ids, use_cache=True)
    cache = out.past_key_values if hasattr(out, "past_key_values") and out.past_key_values is not None else out.cache
    return cache, *target_layer_kv(cache, layer)


def _root_step(draft, ring, cache, token, position):
    """Draft logits (1, 1, V) of one tree root at `position`, reading `cache` (a DynamicCache)."""
    keys, values = target_layer_kv(cache, draft.target_layer_index)
    extra = tuple(target_layer_kv(cache, layer) for layer in draft.target_layers[1:])
    tree_kv = torch.zeros(2, 1, draft.config.num_key_value_heads, 1, draft.config.head_dim)
    context = DraftStepContext(ring, tree_kv[0], tree_kv[1], keys, values, torch.tensor([keys.shape[2]]), extra)
    return draft.decode_step(context, token_ids=token, position_ids=torch.tensor([[position]]), slot=0,
                             tree_mask=torch.ones(1, 1, 1, dtype=torch.bool))[0]


def _decode_root(draft, target, ids, position):
    """Draft logits for the token at `position`, run as a tree root in decoding mode."""
    cache, _, _ = _target_kv(target, ids[:, :position], draft.target_layer_index)
    ring = draft.start(ids[:, :position])
    return _root_step(draft, ring, cache, ids[:, position : position + 1], position)[0, 0], ring


def test_config_copies_target_shapes_and_longspec_fields():
    target = tiny_llama()
    config = LongSpecDraftConfig.from_target_config(target.config, sliding_window=32, tree_widths=[2, 3])
    assert (config.hidden_size, config.num_attention_heads, config.num_key_value_heads, config.head_dim) == (64, 4, 2, 16)
    assert config.vocab_size == 96 and config.max_position_embeddings == 2048
    assert config.rope_parameters["rope_theta"] == target.config.rope_parameters["rope_theta"]
    assert (config.sliding_window, config.tree_widths, config.target_layer_index) == (32, [2, 3], -1)
    assert LongSpecDraftConfig().num_anchor_tokens == 4 and LongSpecDraftConfig().sliding_window == 512
    with pytest.raises(ValueError, match="hidden_size"):
        LongSpecDraftConfig.from_target_config(target.config, hidden_size=8)
    with pytest.raises(TypeError, match="Unknown"):
        LongSpecDraftConfig.from_target_config(target.config, no_such_field=1)


def test_forward_shapes_dtypes_and_no_target_weights_in_state():
    target = tiny_llama()
    draft = LongSpecDraftModel.from_target(target, sliding_window=8)
    ids = torch.randint(0, 96, (2, 20))
    _, keys, values = _target_kv(target, ids, draft.target_layer_index)
    out = draft(ids, keys, values, noise_shift=2, labels=ids)
    assert out.logits.shape == (2, 20, 96) and out.logits.dtype == torch.float32
    assert out.loss.ndim == 0 and torch.isfinite(out.loss)
    names = set(draft.state_dict())
    assert not any("embed" in n or "lm_head" in n for n in names)
    assert {"cross_attn.q_proj.weight", "cross_attn.o_proj.weight"} <= names
    assert not any(n.startswith("cross_attn.k_proj") or n.startswith("cross_attn.v_proj") for n in names)
    # the draft's parameters exclude the target's
    target_ids = {id(p) for p in target.parameters()}
    assert not any(id(p) in target_ids for p in draft.parameters())


def test_save_load_roundtrip_is_identical_and_auto_classes_work(tmp_path):
    target = tiny_llama()
    draft = LongSpecDraftModel.from_target(target, sliding_window=8)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    draft.save_pretrained(tmp_path)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["config.json", "model.safetensors"]
    assert AutoConfig.from_pretrained(tmp_path).model_type == "longspec_draft"
    loaded = AutoModel.from_pretrained(tmp_path)
    assert isinstance(loaded, LongSpecDraftModel)
    loaded.bind(target)
    ids = torch.randint(0, 96, (1, 24))
    _, keys, values = _target_kv(target, ids, draft.target_layer_index)
    with torch.no_grad():
        a = draft.eval()(ids, keys, values, noise_shift=1).logits
        b = loaded.eval()(ids, keys, values, noise_shift=1).logits
    assert torch.equal(a, b)


def test_ring_buffer_state_is_constant_in_context_length():
    target = tiny_llama(max_positions=9000, layers=1)
    draft = LongSpecDraftModel.from_target(target, sliding_window=64)
    short = draft.start(torch.randint(0, 96, (1, 1024)))
    long = draft.start(torch.randint(0, 96, (1, 8192)))
    assert short.nbytes == long.nbytes > 0
    assert long.positions.max().item() == 8191 and long.positions.min().item() == 8192 - 64


def test_no_dtype_cast_rounds_the_draft_rope_frequencies():
    """Casting the draft (`.to(torch.bfloat16)`), or making it for a bf16 target (`from_target`, then
    training's float32 master weights), keeps RoPE's angles exact at long positions. A bf16-rounded
    frequency is off by radians at position 8000, where the draft's queries meet the keys the target
    rotated exactly; a draft trained on rounded angles meets exact ones once reloaded."""
    target = tiny_llama(max_positions=9000, layers=1)
    config = LongSpecDraftModel.from_target(target).config
    dim, theta = config.head_dim, config.rope_parameters["rope_theta"]
    positions = torch.arange(8000)[None]
    angles = positions[0, :, None].double() / theta ** (torch.arange(0, dim, 2).double() / dim)
    reference = torch.cat((angles, angles), dim=-1).cos()
    cast = LongSpecDraftModel.from_target(target).to(torch.bfloat16)
    with pytest.warns(UserWarning, match="RoPE frequencies"):  # the cast target's own are rounded (next test)
        made_for_bf16 = LongSpecDraftModel.from_target(copy.deepcopy(target).to(torch.bfloat16))
    trained = copy.deepcopy(made_for_bf16).to(torch.float32)  # what train_draft does first
    for name, draft in (("cast", cast), ("made for a bf16 target", made_for_bf16), ("trained", trained)):
        assert draft.rotary_emb.inv_freq.dtype == torch.float32, name
        cos, _ = draft.rotary_emb(positions, torch.float32)
        assert (cos[0].double() - reference).abs().max() < 5e-3, name
    assert cast.norm.weight.dtype == torch.bfloat16  # the weights do take the cast


def test_binding_a_target_whose_own_rope_was_rounded_warns_and_names_the_fix(tmp_path):
    """A target cast with `.to(torch.bfloat16)` rounds its own RoPE frequencies (transformers' buffer): the
    draft is told why tau will fall; a target loaded with `dtype=` keeps them float32 and binds silently."""
    import warnings

    from transformers import LlamaForCausalLM

    target = tiny_llama(layers=1)
    with pytest.warns(UserWarning, match=r"RoPE frequencies are torch.bfloat16.*from_pretrained\(\.\.\., dtype=torch.bfloat16\)"):
        LongSpecDraftModel.from_target(copy.deepcopy(target).to(torch.bfloat16))
    target.save_pretrained(tmp_path)
    loaded = LlamaForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    assert loaded.model.rotary_emb.inv_freq.dtype == torch.float32
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LongSpecDraftModel.from_target(loaded)
        LongSpecDraftModel.from_target(copy.deepcopy(target).double())  # more precise than float32: nothing lost


def _training_forward_at(draft, target, ids, position):
    """float64 logits of the draft's training forward (noise shift 1) at `position`: what a root drafted
    there must give."""
    target64, draft64 = copy.deepcopy(target).double(), copy.deepcopy(draft).double()
    draft64.bind(target64)
    cache, _, _ = _target_kv(target64, ids[:, : position + 1], draft64.target_layer_index)
    keys, values = target_layers_kv(cache, draft64.target_layers)
    with torch.no_grad():
        return draft64(ids[:, : position + 1], keys, values, noise_shift=1).logits[0, position]


def _decodes_as_it_trains_and_unlike(plain, draft, target, ids, position):
    """A root decoded by `draft` at `position` moved off `plain`'s and equals `draft`'s training forward there."""
    got, _ = _decode_root(draft, target, ids, position)
    assert not torch.allclose(got, _decode_root(plain, target, ids, position)[0], atol=1e-3)
    ref = _training_forward_at(draft, target, ids, position)  # the training forward there, float64
    assert (got.double() - ref).norm() / ref.norm() < 1e-5


def _two_nodes_after(draft, target, ids, length=30):
    """Target layer K/V over ids[:, :length], and random hidden states with the RoPE of two nodes right after."""
    _, keys, values = _target_kv(target, ids[:, :length], draft.target_layer_index)
    hidden, positions = torch.randn(1, 2, 64), torch.tensor([[length, length + 1]])
    return keys, values, hidden, *draft.rotary_emb(positions, hidden.dtype)


def test_decoding_equals_float64_whole_sequence_reference_beyond_the_window():
    """A root drafted against the ring buffer and live cache equals the training forward (noise
    shift 1: the root's own target K/V is not cached yet) computed in float64."""
    target = tiny_llama(layers=2)
    draft = LongSpecDraftModel.from_target(target, sliding_window=16)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    ids = torch.randint(0, 96, (1, 60))
    position = 50  # well past the window: only positions 35..50 may be seen
    got, _ = _decode_root(draft, target, ids, position)
    ref = _training_forward_at(draft, target, ids, position)
    assert (got.double() - ref).norm() / ref.norm() < 1e-5

    # tokens outside the window must not matter; tokens inside must
    changed_far = ids.clone()
    changed_far[0, : position - 16] = (changed_far[0, : position - 16] + 1) % 96
    changed_near = ids.clone()
    changed_near[0, position - 3] = (changed_near[0, position - 3] + 1) % 96
    far_cache, _, _ = _target_kv(target, ids[:, :position], draft.target_layer_index)
    ring_far = draft.start(changed_far[:, :position])
    ring_near = draft.start(changed_near[:, :position])
    root = ids[:, position : position + 1]
    far_logits = _root_step(draft, ring_far, far_cache, root, position)[0, 0]
    near_logits = _root_step(draft, ring_near, far_cache, root, position)[0, 0]
    assert torch.allclose(far_logits, got, atol=1e-5)
    assert not torch.allclose(near_logits, got, atol=1e-3)


def test_cross_attention_reads_exactly_the_target_layer_cache():
    target = tiny_llama(layers=3)
    draft = LongSpecDraftModel.from_target(target, target_layer_index=1)
    ids = torch.randint(0, 96, (1, 30))
    cache, keys, values = _target_kv(target, ids, 1)
    hidden = torch.randn(1, 2, 64)
    positions = torch.tensor([[30, 31]])
    cos, sin = draft.rotary_emb(positions, hidden.dtype)
    with torch.no_grad():
        got = draft.cross_attn.forward_step(hidden, cos, sin, keys, values, torch.tensor([keys.shape[2]]))
        # float64 reference from the cached tensors themselves
        attn = draft.cross_attn.double()
        q = attn.project_q(hidden.double(), cos.double(), sin.double())  # (1, 4, 2, 16)
        k = keys.double().repeat_interleave(2, dim=1)
        v = values.double().repeat_interleave(2, dim=1)
        weights = torch.softmax(q @ k.transpose(-1, -2) * 16**-0.5, dim=-1)
        ref = attn.output(weights @ v)
        draft.cross_attn.float()
    assert (got.double() - ref).norm() / ref.norm() < 1e-5
    # the draft reads layer 1, and only layer 1
    root = ids[:, -1:]
    ring = draft.start(ids[:, :-1])
    base = _root_step(draft, ring, cache, root, 30)
    for layer, should_change in ((0, False), (1, True), (2, False)):
        perturbed = copy.deepcopy(cache)
        perturbed.layers[layer].keys.add_(torch.randn_like(perturbed.layers[layer].keys))
        logits = _root_step(draft, ring, perturbed, root, 30)
        assert (not torch.allclose(logits, base, atol=1e-5)) == should_change


def test_bind_errors_name_both_values():
    target = tiny_llama()
    draft = LongSpecDraftModel.from_target(target)
    with pytest.raises(IncompatibleDraftError, match=r"hidden_size.*64.*128"):
        draft.bind(tiny_llama(hidden_size=128, heads=8, kv_heads=2))
    with pytest.raises(IncompatibleDraftError, match=r"head_dim.*16.*32"):
        draft.bind(tiny_llama(heads=2, kv_heads=2))
    with pytest.raises(IncompatibleDraftError, match=r"vocab_size.*96.*100"):
        draft.bind(tiny_llama(vocab_size=100))


def test_unsupported_target_and_unbound_draft_errors():
    gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50))
    with pytest.raises(UnsupportedTargetError, match="gpt2.*supported: llama"):
        LongSpecDraftModel.from_target(gpt2)
    sliding = tiny_llama()
    sliding.config.layer_types = ["sliding_attention", "full_attention"]
    with pytest.raises(UnsupportedTargetError, match="sliding"):
        LongSpecDraftModel.from_target(sliding)
    unbound = LongSpecDraftModel(LongSpecDraftConfig.from_target_config(tiny_llama().config))
    with pytest.raises(UnboundDraftError, match="bind"):
        unbound(torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 2, 4, 16), torch.zeros(1, 2, 4, 16))


def test_draft_for_the_embedded_target(embedded):
    from hf_longspec.corpus import long_prompt_ids

    target, tokenizer = embedded
    draft = LongSpecDraftModel.from_target(target)
    assert draft.config.hidden_size == 576 and draft.config.num_key_value_heads == 3 and draft.config.head_dim == 64
    assert draft.target_layer_index == 29
    assert 3_000_000 < sum(p.numel() for p in draft.parameters()) < 6_000_000
    ids = torch.tensor([long_prompt_ids(tokenizer, 256, kind="prose", seed=1)])
    _, keys, values = _target_kv(target, ids, draft.target_layer_index)
    assert keys.shape == (1, 3, 256, 64)
    with torch.no_grad():
        out = draft(ids, keys, values, noise_shift=1, labels=ids)
    assert torch.isfinite(out.loss) and out.logits.shape == (1, 256, 49152)


def _rms(x, weight, eps):
    return weight * x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)


def _rope(x, position, theta):
    """Rotary embedding from its definition (halves rotated), float64; x: (heads, d)."""
    half = x.shape[-1] // 2
    freqs = position / theta ** (torch.arange(half, dtype=torch.float64) * 2 / x.shape[-1])
    cos, sin = torch.cos(freqs), torch.sin(freqs)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def _attention(q, keys, values):
    """q: (Hq, d); keys/values: (n, Hkv, d); grouped heads; float64 softmax attention -> (Hq * d,)."""
    group = q.shape[0] // keys.shape[1]
    k = keys.repeat_interleave(group, dim=1).transpose(0, 1)  # (Hq, n, d)
    v = values.repeat_interleave(group, dim=1).transpose(0, 1)
    weights = torch.softmax((k @ q[:, :, None])[..., 0] / q.shape[-1] ** 0.5, dim=-1)  # (Hq, n)
    return (weights[:, None, :] @ v)[:, 0].flatten()


@torch.no_grad()
def test_decode_steps_equal_a_float64_reference_written_from_the_math():
    """Two drafted depths (root, then one child) against plain float64 math over the same weights:
    sliding-window self-attention over exactly positions p-W+1..p (ring + tree ancestors), cross-
    attention over exactly the target's committed cache of the bound layer, RMSNorms, MLP, LM head."""
    window, prompt = 8, 30
    target = tiny_llama(layers=2)
    draft = LongSpecDraftModel.from_target(target, sliding_window=window)
    for p in draft.parameters():
        p.add_(torch.randn_like(p) * 0.05)
    ids = torch.randint(0, 96, (1, prompt + 2), generator=torch.Generator().manual_seed(4))
    cache, target_keys, target_values = _target_kv(target, ids[:, :prompt], draft.target_layer_index)
    ring = draft.start(ids[:, :prompt])
    heads, kv_heads, dim = draft.config.num_attention_heads, draft.config.num_key_value_heads, draft.config.head_dim
    tree_kv = torch.zeros(2, 1, kv_heads, 2, dim)
    context = DraftStepContext(ring, tree_kv[0], tree_kv[1], target_keys, target_values, torch.tensor([prompt]))
    mask = torch.tensor([[[True, False]], [[True, True]]])  # node 0 = root sees itself; node 1 sees 0 and itself
    got = [draft.decode_step(context, token_ids=ids[:, prompt + n : prompt + n + 1],
                             position_ids=torch.tensor([[prompt + n]]), slot=n, tree_mask=mask[n][None])[0][0, 0]
           for n in range(2)]

    w = {name: p.double() for name, p in draft.named_parameters()}
    embed = target.get_input_embeddings().weight.double()
    lm_head = target.get_output_embeddings().weight.double()
    eps, theta = draft.config.rms_norm_eps, draft.config.rope_parameters["rope_theta"]

    def self_kv(token, position):
        x = _rms(embed[token], w["input_layernorm.weight"], eps)
        k = _rope((w["self_attn.k_proj.weight"] @ x).view(kv_heads, dim), position, theta)
        return k, (w["self_attn.v_proj.weight"] @ x).view(kv_heads, dim)

    for n in range(2):
        position, token = prompt + n, int(ids[0, prompt + n])
        visible = range(max(0, position - window + 1), position + 1)  # the sliding window, itself included
        kv = [self_kv(int(ids[0, p]), p) for p in visible]
        keys, values = torch.stack([k for k, _ in kv]), torch.stack([v for _, v in kv])
        h = embed[token]
        x = _rms(h, w["input_layernorm.weight"], eps)
        q = _rope((w["self_attn.q_proj.weight"] @ x).view(heads, dim), position, theta)
        h = h + w["self_attn.o_proj.weight"] @ _attention(q, keys, values)
        x = _rms(h, w["cross_attn_layernorm.weight"], eps)
        q = _rope((w["cross_attn.q_proj.weight"] @ x).view(heads, dim), position, theta)
        committed_k = target_keys[0].double().transpose(0, 1)  # (prompt, Hkv, d): post-RoPE, as cached
        committed_v = target_values[0].double().transpose(0, 1)
        h = h + w["cross_attn.o_proj.weight"] @ _attention(q, committed_k, committed_v)
        x = _rms(h, w["post_attention_layernorm.weight"], eps)
        gate, up = w["mlp.gate_proj.weight"] @ x, w["mlp.up_proj.weight"] @ x
        h = h + w["mlp.down_proj.weight"] @ (torch.nn.functional.silu(gate) * up)
        reference = lm_head @ _rms(h, w["norm.weight"], eps)
        assert (got[n].double() - reference).norm() / reference.norm() < 1e-5, f"depth {n}"


def test_length_scaled_cross_attention_follows_the_math_and_decodes_as_it_trains():
    """cross_attention_length_scale=n0: head h's queries are scaled by 1 + g_h ln(n / n0), n = the
    target entries read. Decoding (n = the committed length) equals plain float64 math and the
    training forward at the same position (n = i - shift + 1); gains of zero change nothing."""
    target = tiny_llama(layers=2)
    plain = LongSpecDraftModel.from_target(target, sliding_window=16)
    with torch.no_grad():
        for p in plain.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    scaled = LongSpecDraftModel.from_target(target, sliding_window=16, cross_attention_length_scale=8)
    missing = scaled.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing == ["cross_attn.length_gain"] and torch.all(scaled.cross_attn.length_gain == 0)
    ids = torch.randint(0, 96, (1, 60), generator=torch.Generator().manual_seed(1))
    position = 50
    assert torch.equal(_decode_root(scaled, target, ids, position)[0], _decode_root(plain, target, ids, position)[0])

    gains = torch.tensor([0.4, -0.3, 0.8, 0.1])
    with torch.no_grad():
        scaled.cross_attn.length_gain.copy_(gains)
    _decodes_as_it_trains_and_unlike(plain, scaled, target, ids, position)

    # the cross-attention itself against the formula, float64
    keys, values, hidden, cos, sin = _two_nodes_after(scaled, target, ids)
    with torch.no_grad():
        out = scaled.cross_attn.forward_step(hidden, cos, sin, keys, values, torch.tensor([30]))
        attn = copy.deepcopy(scaled.cross_attn).double()
        q = attn.project_q(hidden.double(), cos.double(), sin.double())  # (1, 4, 2, 16)
        q = q * (1 + gains.double()[:, None, None] * torch.log(torch.tensor(30 / 8, dtype=torch.float64)))
        k, v = keys.double().repeat_interleave(2, dim=1), values.double().repeat_interleave(2, dim=1)
        expected = attn.output(torch.softmax(q @ k.transpose(-1, -2) * 16**-0.5, dim=-1) @ v)
    assert (out.double() - expected).norm() / expected.norm() < 1e-5
    # a tensor-parallel rank scales its own block of heads by their own gains: the ranks' sum is the whole
    from hf_longspec.tensor_parallel import HeadShard

    class LocalShard(HeadShard):
        def all_reduce(self, partial):
            return partial  # summed below, as the ranks' all-reduce would

    with torch.no_grad():
        parts = [scaled.cross_attn.forward_step(hidden, cos, sin, keys[:, r : r + 1], values[:, r : r + 1],
                                                torch.tensor([30]), LocalShard(r, 2, None)) for r in (0, 1)]
    torch.testing.assert_close(parts[0] + parts[1], out)
    with pytest.raises(ValueError, match="cross_attention_length_scale must be None"):
        LongSpecDraftModel.from_target(target, cross_attention_length_scale=0)


def test_target_entry_input_reads_the_newest_entry_and_decodes_as_it_trains():
    """target_entry_input=True: the cross-attention adds W [k, v] of the newest target entry a query
    may see, its key un-rotated back to what the target's k_proj gave (caught by a hook on it). W
    starts at zero and then changes nothing; a root decoded against the cache (entry: the last
    committed one) equals the training forward (noise shift 1: entry i - 1) in float64; a
    tensor-parallel rank adds its own KV heads' columns, and the ranks' sum is the whole."""
    from hf_longspec.tensor_parallel import HeadShard

    target = tiny_llama(layers=2)
    plain = LongSpecDraftModel.from_target(target, sliding_window=16)
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in plain.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * 0.05)
    reading = LongSpecDraftModel.from_target(target, sliding_window=16, target_entry_input=True)
    missing = reading.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert missing == ["cross_attn.entry_proj.weight"] and torch.all(reading.cross_attn.entry_proj.weight == 0)
    ids = torch.randint(0, 96, (1, 60), generator=torch.Generator().manual_seed(1))
    position = 50
    assert torch.equal(_decode_root(reading, target, ids, position)[0], _decode_root(plain, target, ids, position)[0])

    with torch.no_grad():
        reading.cross_attn.entry_proj.weight.copy_(torch.randn(64, 2 * 2 * 16, generator=generator) * 0.3)
    got, _ = _decode_root(reading, target, ids, position)
    assert not torch.allclose(got, _decode_root(plain, target, ids, position)[0], atol=1e-3)
    ref = _training_forward_at(reading, target, ids, position)
    assert (got.double() - ref).norm() / ref.norm() < 1e-5

    # the term itself: W times [k, v] per KV head of the last committed entry, k before RoPE
    captured = {}
    k_proj = target.model.layers[reading.target_layer_index].self_attn.k_proj
    hook = k_proj.register_forward_hook(lambda module, args, out: captured.__setitem__("k", out))
    _, keys, values = _target_kv(target, ids[:, :30], reading.target_layer_index)
    hook.remove()
    raw_key = captured["k"].view(1, 30, 2, 16)[0, -1]  # (H_kv, D) at position 29
    feature = torch.cat([raw_key, values[0, :, -1]], dim=-1).flatten()  # [k0, v0, k1, v1]
    hidden, positions = torch.randn(1, 2, 64, generator=generator), torch.tensor([[30, 31]])
    cos, sin = reading.rotary_emb(positions, hidden.dtype)
    lengths = torch.tensor([30])

    def newest(keys, values):
        tree_kv = torch.zeros(2, 1, keys.shape[1], 1, 16)
        return reading._newest_committed_entry(DraftStepContext(None, tree_kv[0], tree_kv[1], keys, values, lengths), 2)

    with torch.no_grad():
        out = reading.cross_attn.forward_step(hidden, cos, sin, keys, values, lengths, None, newest(keys, values))
        without = plain.cross_attn.forward_step(hidden, cos, sin, keys, values, lengths)
        expected = reading.cross_attn.entry_proj.weight @ feature
    torch.testing.assert_close(out - without, expected.expand(1, 2, -1), rtol=1e-4, atol=1e-5)

    class LocalShard(HeadShard):
        def all_reduce(self, partial):
            return partial  # summed below, as the ranks' all-reduce would

    with torch.no_grad():
        parts = [reading.cross_attn.forward_step(hidden, cos, sin, keys[:, r : r + 1], values[:, r : r + 1], lengths,
                                                 LocalShard(r, 2, None), newest(keys[:, r : r + 1], values[:, r : r + 1]))
                 for r in (0, 1)]
    torch.testing.assert_close(parts[0] + parts[1], out)

    # a batch: each row reads its own last committed entry; a row with none committed reads nothing
    def newest_of(keys, values, lengths):
        tree_kv = torch.zeros(2, keys.shape[0], keys.shape[1], 1, 16)
        context = DraftStepContext(None, tree_kv[0], tree_kv[1], keys, values, torch.tensor(lengths))
        return reading._newest_committed_entry(context, 3)

    batch_keys, batch_values = torch.randn(2, 2, 40, 16, generator=generator), torch.randn(2, 2, 40, 16, generator=generator)
    both = newest_of(batch_keys, batch_values, [30, 17])
    assert both.shape == (2, 3, 2 * 2 * 16)
    torch.testing.assert_close(both[0], newest_of(batch_keys[:1], batch_values[:1], [30])[0])
    torch.testing.assert_close(both[1], newest_of(batch_keys[1:], batch_values[1:], [17])[0])
    assert not torch.allclose(both[0], both[1])
    assert torch.all(newest_of(batch_keys, batch_values, [30, 0])[1] == 0)
    with pytest.raises(ValueError, match="forward_step needs newest_entry"):
        reading.cross_attn.forward_step(hidden, cos, sin, keys, values, lengths)
    with pytest.raises(ValueError, match="target_entry_input must be True or False"):
        LongSpecDraftModel.from_target(target, target_entry_input=1)


def _perturbed(draft):
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p, generator=torch.Generator().manual_seed(p.numel())) * 0.05)
    return draft


def test_a_draft_reading_several_target_layers_decodes_as_it_trains():
    """extra_target_layer_indices: each layer read has its own block of query heads. A root drafted against
    the live cache (each layer's buffers in place) equals the float64 training forward (the layers side by
    side on the head axis); each block reads its own layer; a tensor-parallel rank's share of every block
    sums to the whole; and the one-layer draft's heads are as before."""
    from hf_longspec.tensor_parallel import HeadShard

    target = tiny_llama(layers=3)
    draft = _perturbed(LongSpecDraftModel.from_target(target, sliding_window=16, extra_target_layer_indices=[0, -2],
                                                      cross_attention_length_scale=8))
    assert draft.target_layers == (2, 0, 1) and draft.cross_attn.q_proj.weight.shape == (3 * 4 * 16, 64)
    assert draft.cross_attn.length_gain.shape == (12,) and draft.cross_attn.length_gain.abs().min() > 0  # per head
    ids = torch.randint(0, 96, (1, 60), generator=torch.Generator().manual_seed(2))
    position = 50
    got, _ = _decode_root(draft, target, ids, position)
    ref = _training_forward_at(draft, target, ids, position)
    assert (got.double() - ref).norm() / ref.norm() < 1e-5

    # block l reads layer target_layers[l]: swapping the extra layers' buffers changes the draft's output
    cache, _, _ = _target_kv(target, ids[:, :30], 2)
    (k2, v2), (k0, v0), (k1, v1) = (target_layer_kv(cache, layer) for layer in (2, 0, 1))
    hidden, positions = torch.randn(1, 2, 64), torch.tensor([[30, 31]])
    cos, sin = draft.rotary_emb(positions, hidden.dtype)
    lengths = torch.tensor([30])
    with torch.no_grad():
        whole = draft.cross_attn.forward_step(hidden, cos, sin, k2, v2, lengths, extra_kv=((k0, v0), (k1, v1)))
        swapped = draft.cross_attn.forward_step(hidden, cos, sin, k2, v2, lengths, extra_kv=((k1, v1), (k0, v0)))
        assert not torch.allclose(whole, swapped, atol=1e-4)
        # each block alone against float64 math over its own layer
        attn = copy.deepcopy(draft.cross_attn).double()
        q = attn.project_q(hidden.double(), cos.double(), sin.double())  # (1, 12, 2, 16)
        q = q * (1 + attn.length_gain.double()[:, None, None] * torch.log(torch.tensor(30 / 8, dtype=torch.float64)))
        k = torch.cat([k2, k0, k1], dim=1).double().repeat_interleave(2, dim=1)
        v = torch.cat([v2, v0, v1], dim=1).double().repeat_interleave(2, dim=1)
        expected = attn.output(torch.softmax(q @ k.transpose(-1, -2) * 16**-0.5, dim=-1) @ v)
    assert (whole.double() - expected).norm() / expected.norm() < 1e-5

    class LocalShard(HeadShard):
        def all_reduce(self, partial):
            return partial  # summed below, as the ranks' all-reduce would

    with torch.no_grad():  # rank r holds KV head r of every layer
        parts = [draft.cross_attn.forward_step(hidden, cos, sin, k2[:, r : r + 1], v2[:, r : r + 1], lengths,
                                               LocalShard(r, 2, None),
                                               extra_kv=((k0[:, r : r + 1], v0[:, r : r + 1]),
                                                         (k1[:, r : r + 1], v1[:, r : r + 1]))) for r in (0, 1)]
    torch.testing.assert_close(parts[0] + parts[1], whole)
    assert draft.cross_attn.layer_heads(1, LocalShard(1, 2, None)) == (6, 8)
    one = LongSpecDraftModel.from_target(target)
    assert one.cross_attn.layer_heads(0) is None and one.cross_attn.layer_heads(0, LocalShard(1, 2, None)) == (2, 4)


def test_extra_target_layers_are_refused_with_what_is_allowed():
    target = tiny_llama(layers=3)
    with pytest.raises(IncompatibleDraftError, match=r"extra_target_layer_indices \[3\] are outside the target's 3 layers"):
        LongSpecDraftModel.from_target(target, extra_target_layer_indices=[0, 3])
    with pytest.raises(ValueError, match="one of them twice"):
        LongSpecDraftModel.from_target(target, extra_target_layer_indices=[2])  # -1 is layer 2
    unresolved = LongSpecDraftConfig(extra_target_layer_indices=[2])  # no target yet: -1 is not known to be 2
    with pytest.raises(IncompatibleDraftError, match="one of them twice"):
        LongSpecDraftModel(LongSpecDraftConfig.from_dict({**unresolved.to_dict(), **{
            k: v for k, v in LongSpecDraftConfig.from_target_config(target.config).to_dict().items()
            if k not in ("extra_target_layer_indices", "target_num_hidden_layers")}})).bind(target)
    with pytest.raises(ValueError, match="one of them twice"):
        LongSpecDraftConfig(target_layer_index=1, extra_target_layer_indices=[1])
    for bad in ([1, 1], 1, [True], ["0"]):
        with pytest.raises(ValueError, match="extra_target_layer_indices must be a list of distinct ints"):
            LongSpecDraftModel.from_target(target, extra_target_layer_indices=bad)
    with pytest.raises(ValueError, match="cannot be combined with target_entry_input"):
        LongSpecDraftModel.from_target(target, extra_target_layer_indices=[0], target_entry_input=True)
    draft = LongSpecDraftModel.from_target(target, extra_target_layer_indices=[0])
    ids = torch.randint(0, 96, (1, 12))
    _, keys, values = _target_kv(target, ids, 2)
    with pytest.raises(ValueError, match="target_keys has 2 heads; this draft reads target layers \\[2, 0\\].*allowed: 4"):
        draft(ids, keys, values)  # one layer's K/V handed to a two-layer reader


def test_a_draft_reading_several_target_layers_saves_and_loads(tmp_path):
    target = tiny_llama(layers=3)
    draft = _perturbed(LongSpecDraftModel.from_target(target, extra_target_layer_indices=[0]))
    draft.save_pretrained(tmp_path)
    loaded = LongSpecDraftModel.from_pretrained(tmp_path).bind(target)
    assert loaded.config.extra_target_layer_indices == [0] and loaded.target_layers == (2, 0)
    ids = torch.randint(0, 96, (1, 20))
    cache, _, _ = _target_kv(target, ids, 2)
    keys, values = target_layers_kv(cache, loaded.target_layers)
    with torch.no_grad():
        assert torch.equal(loaded(ids, keys, values).logits, draft(ids, keys, values).logits)


def test_cross_attention_window_reads_the_anchors_and_the_newest_entries_and_decodes_as_it_trains():
    """cross_attention_window=W: the cross-attention reads the num_anchor_tokens first target entries and the
    newest W, nothing between. Decoding equals the formula over those entries and the training forward at
    the same position; a window holding every entry changes nothing; the config is read at each call, and a
    value that is not a positive int (or None) is refused by name."""
    target = tiny_llama(layers=2)
    plain = LongSpecDraftModel.from_target(target, sliding_window=16)
    with torch.no_grad():
        for p in plain.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    windowed = copy.deepcopy(plain)
    windowed.config.cross_attention_window = 8  # set after construction: read at each call
    ids = torch.randint(0, 96, (1, 60), generator=torch.Generator().manual_seed(1))
    position = 50
    _decodes_as_it_trains_and_unlike(plain, windowed, target, ids, position)

    # the cross-attention itself against the formula over entries 0-3 and 22-29, float64
    keys, values, hidden, cos, sin = _two_nodes_after(windowed, target, ids)
    read = torch.tensor([0, 1, 2, 3, *range(22, 30)])
    with torch.no_grad():
        out = windowed.cross_attn.forward_step(hidden, cos, sin, keys, values, torch.tensor([30]))
        attn = copy.deepcopy(windowed.cross_attn).double()
        q = attn.project_q(hidden.double(), cos.double(), sin.double())
        k = keys[:, :, read].double().repeat_interleave(2, dim=1)
        v = values[:, :, read].double().repeat_interleave(2, dim=1)
        expected = attn.output(torch.softmax(q @ k.transpose(-1, -2) * 16**-0.5, dim=-1) @ v)
        assert (out.double() - expected).norm() / expected.norm() < 1e-5
        # asked per call (a decoder passes its call's window), the config aside
        torch.testing.assert_close(plain.cross_attn.forward_step(hidden, cos, sin, keys, values, torch.tensor([30]),
                                                                 window=8), out)
        windowed.config.cross_attention_window = 26  # 4 anchors + 26 newest: all 30 entries
        whole = plain.cross_attn.forward_step(hidden, cos, sin, keys, values, torch.tensor([30]))
        torch.testing.assert_close(windowed.cross_attn.forward_step(hidden, cos, sin, keys, values, torch.tensor([30])),
                                   whole)
    for bad in (0, -2, True, 2.5):
        with pytest.raises(ValueError, match="cross_attention_window must be None .* or a positive int"):
            LongSpecDraftModel.from_target(target, cross_attention_window=bad)
        windowed.config.cross_attention_window = bad  # set on a built draft: refused when read
        with pytest.raises(ValueError, match="cross_attention_window must be None .* or a positive int"):
            _decode_root(windowed, target, ids, position)


def test_a_node_at_tree_depth_k_drafts_as_training_shift_k_plus_one_trains_it():
    """Flash Noisy Training's shift d is the gap a tree node drafts across: the node at depth k reads the target
    K/V up to the root's predecessor, so its q equals the training forward's with shift k + 1 at its position
    (and not k or k + 2's). A tree of depth D runs depths 0..D-1 only, so inference uses shifts 1..D."""
    from hf_longspec.generation.draft_tree import TreeBuffers, TreeDrafter, TreeLayout

    target = tiny_llama(layers=2).double()
    draft = LongSpecDraftModel.from_target(target, sliding_window=16).double()
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    draft.bind(target)
    ids, position = torch.randint(0, 96, (1, 40), generator=torch.Generator().manual_seed(2)), 30
    layout = TreeLayout((1, 1, 1))
    buffers = TreeBuffers.allocate(layout, 1, "cpu", 96, keep_probs=True)
    cache, keys, values = _target_kv(target, ids[:, :position], draft.target_layer_index)
    tree_kv = torch.zeros(2, 1, draft.config.num_key_value_heads, layout.num_run, draft.config.head_dim,
                          dtype=torch.float64)
    context = DraftStepContext(draft.start(ids[:, :position]), tree_kv[0], tree_kv[1], keys, values,
                               torch.tensor([position]), cross_attention_window=None)
    TreeDrafter(draft, layout, buffers).build(context, ids[0, position : position + 1], torch.tensor([position]))
    sequence = torch.cat([ids[:, :position], buffers.tokens[:, : layout.num_run]], dim=1)  # the root, then its path
    _, seq_keys, seq_values = _target_kv(target, sequence, draft.target_layer_index)

    def trained_q(shift, depth):
        with torch.no_grad():
            logits = draft(sequence, seq_keys, seq_values, noise_shift=shift).logits[0, position + depth]
        return torch.softmax(logits, dim=-1)

    for depth in range(layout.num_run):  # depths 0, 1, 2: the leaf at depth 3 is never run
        drafted = buffers.draft_probs[0, depth].double()
        assert torch.allclose(drafted, trained_q(depth + 1, depth), atol=1e-6), depth
        for other in {depth, depth + 2} - {0}:
            assert not torch.allclose(drafted, trained_q(other, depth), atol=1e-4), (depth, other)
