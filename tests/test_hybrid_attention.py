"""Hybrid tree attention: LSE merge, prefix backends, prefix + tree against one masked attention,
and the registered transformers attention function inside a tiny random Llama."""

import inspect
import sys
import types

import pytest
import torch

from attention_reference import (
    ancestor_or_self_mask,
    assert_close_attention,
    generator_for,
    prefix_and_tree_allowed,
    randn,
    random_parents,
    random_tree_mask,
    reference_attention,
    tree_depths,
)
import hf_longspec.attention.prefix as prefix_module
import hf_longspec.attention.tree as tree_module
import hf_longspec.kernels._launch as launch
from hf_longspec.attention import (
    LONGSPEC_ATTENTION,
    hybrid_tree_attention,
    longspec_attention_forward,
    merge_attention_states,
    prefix_attention,
    prefix_backend_name,
    register_longspec_attention,
    set_prefix_backend,
)
from hf_longspec.kernels import triton_can_run_on

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not triton_can_run_on(DEVICE), reason="Triton cannot run here")


@pytest.fixture(autouse=True)
def poisoned_outputs_and_default_backend(monkeypatch):
    monkeypatch.setattr(launch, "POISON_OUTPUTS", True)
    monkeypatch.setattr(tree_module, "TREE_BACKEND", "triton")  # on the CPU too: these tests are about the kernel
    yield
    set_prefix_backend(None)


def test_merge_equals_attention_over_the_union_of_keys(request):
    gen = generator_for(request)
    q = randn(gen, 2, 4, 6, 64)
    k_a, v_a = randn(gen, 2, 2, 50, 64), randn(gen, 2, 2, 50, 64)
    k_b, v_b = randn(gen, 2, 2, 9, 64), randn(gen, 2, 2, 9, 64)
    out_a, lse_a = reference_attention(q, k_a, v_a, 0.125)
    out_b, lse_b = reference_attention(q, k_b, v_b, 0.125)
    out, lse = merge_attention_states(out_a.float(), lse_a.float(), out_b.to(BF16), lse_b.float())
    assert out.dtype == F32 and lse.dtype == F32
    ref_out, ref_lse = reference_attention(q, torch.cat([k_a, k_b], 2), torch.cat([v_a, v_b], 2), 0.125)
    assert_close_attention(out, lse, ref_out, ref_lse, BF16)


def test_merge_with_empty_sides():
    out_a, out_b = torch.randn(3, 8), torch.full((3, 8), float("nan"))
    lse_a = torch.tensor([0.5, float("-inf"), float("-inf")])
    lse_b = torch.tensor([float("-inf"), 1.5, float("-inf")])
    out_b[1] = 2.0
    out, lse = merge_attention_states(out_a, lse_a, out_b, lse_b)
    assert torch.equal(out[0], out_a[0]) and torch.all(out[1] == 2.0) and torch.all(out[2] == 0)
    assert lse.tolist() == [0.5, 1.5, float("-inf")]


@pytest.mark.parametrize("prefix_len", [0, 1, 300])
def test_prefix_attention_math_backend(request, prefix_len):
    gen = generator_for(request)
    q = randn(gen, 1, 5, 12, 64, dtype=BF16).transpose(1, 2)  # 12 query heads over 4 KV heads
    k, v = randn(gen, 1, 4, prefix_len, 64, dtype=BF16), randn(gen, 1, 4, prefix_len, 64, dtype=BF16)
    assert prefix_backend_name("cpu", BF16) == "math"
    out, lse = prefix_attention(q, k, v, 0.125)
    assert out.dtype == BF16 and out.shape == q.shape and lse.dtype == F32
    ref_out, ref_lse = reference_attention(q, k, v, 0.125)
    assert_close_attention(out, lse, ref_out, ref_lse, BF16)


@needs_triton
def test_prefix_attention_forced_triton_splitkv(request):
    gen = generator_for(request)
    set_prefix_backend("triton_splitkv")
    assert prefix_backend_name(DEVICE, F16) == "triton_splitkv"
    q = randn(gen, 1, 8, 4, 128, dtype=F16)
    k, v = randn(gen, 1, 1, 700, 128, dtype=F16), randn(gen, 1, 1, 700, 128, dtype=F16)
    out, lse = prefix_attention(q.to(DEVICE), k.to(DEVICE), v.to(DEVICE), 128**-0.5)
    ref_out, ref_lse = reference_attention(q, k, v, 128**-0.5)
    assert_close_attention(out.cpu(), lse.cpu(), ref_out, ref_lse, F16)


def _stand_in_flash(q, k, v, scale):
    """What the GPU flash kernels compute for (B, H, L, D) inputs with equal head counts; the
    output is laid out (B, L, H, D) in memory like theirs."""
    assert q.shape[1] == k.shape[1] and q.stride(-1) == k.stride(-1) == v.stride(-1) == 1
    out, lse = reference_attention(q, k, v, scale)
    return out.to(q.dtype).transpose(1, 2).contiguous().transpose(1, 2), lse.float()


def test_torch_flash_backend_layout_with_a_stand_in(request, monkeypatch):
    """GQA packing and unpacking around aten._scaled_dot_product_flash_attention (CUDA-only op)."""
    gen = generator_for(request)
    q = randn(gen, 2, 5, 12, 64, dtype=BF16).transpose(1, 2)
    k, v = randn(gen, 2, 3, 40, 64, dtype=BF16), randn(gen, 2, 3, 40, 64, dtype=BF16)

    def flash(q, k, v, dropout_p, is_causal, return_debug_mask, scale):
        assert (dropout_p, is_causal, return_debug_mask) == (0.0, False, False)
        return (*_stand_in_flash(q, k, v, scale), None, None, 0, 0, None, None, None)

    monkeypatch.setattr(torch.ops.aten, "_scaled_dot_product_flash_attention", flash)
    out, lse = prefix_module._prefix_torch_flash(q, k, v, 0.125)
    ref_out, ref_lse = reference_attention(q, k, v, 0.125)
    assert_close_attention(out.flatten(1, 2), lse.flatten(1, 2), ref_out, ref_lse, BF16)


def test_flash_attn_backend_layout_with_a_stand_in(request, monkeypatch):
    """(B, L, H, D) layout, GQA packing and the lse slice around flash_attn_func (not installed here)."""
    gen = generator_for(request)
    q = randn(gen, 1, 7, 8, 64, dtype=F16).transpose(1, 2)
    k, v = randn(gen, 1, 2, 33, 64, dtype=F16), randn(gen, 1, 2, 33, 64, dtype=F16)

    def flash_attn_func(q, k, v, dropout_p, softmax_scale, causal, return_attn_probs):
        assert (dropout_p, causal, return_attn_probs) == (0.0, False, True)
        out, lse = _stand_in_flash(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), softmax_scale)
        padded_lse = torch.cat([lse, torch.zeros(*lse.shape[:2], 128 - lse.shape[2])], dim=2)  # older releases
        return out.transpose(1, 2).contiguous(), padded_lse, None

    monkeypatch.setitem(sys.modules, "flash_attn", types.SimpleNamespace(flash_attn_func=flash_attn_func))
    out, lse = prefix_module._prefix_flash_attn(q, k, v, 0.125)
    ref_out, ref_lse = reference_attention(q, k, v, 0.125)
    assert_close_attention(out.flatten(1, 2), lse.flatten(1, 2), ref_out, ref_lse, F16)


def test_prefix_backend_switch_validates_names(monkeypatch):
    with pytest.raises(ValueError, match="unknown prefix backend"):
        set_prefix_backend("nope")
    monkeypatch.setenv("HF_LONGSPEC_PREFIX_BACKEND", "torch_flash")
    set_prefix_backend(None)
    with pytest.raises(RuntimeError, match="not available"):
        prefix_backend_name("cpu", F32)


# dtype, kv heads, group, head dim, tree length, prefix length, prefix backend, tree part on Triton (else math)
HYBRID_CASES = [
    (F32, 2, 4, 64, 12, 0, "auto", True),
    (F32, 1, 8, 128, 20, 1, "auto", True),
    (BF16, 2, 3, 64, 33, 257, "auto", True),
    (F16, 1, 4, 128, 16, 3000, "auto", True),
    (BF16, 2, 4, 128, 16, 1500, "triton_splitkv", True),
    (F32, 2, 1, 64, 9, 257, "auto", False),
    (BF16, 1, 4, 128, 16, 3000, "auto", False),
]


@pytest.mark.parametrize("dtype,kv_heads,group,head_dim,tree_len,prefix_len,backend,triton_tree", HYBRID_CASES)
def test_hybrid_equals_one_masked_attention_over_prefix_and_tree(
    request, monkeypatch, dtype, kv_heads, group, head_dim, tree_len, prefix_len, backend, triton_tree
):
    if (triton_tree or backend == "triton_splitkv") and not triton_can_run_on(DEVICE):
        pytest.skip("Triton cannot run here")
    set_prefix_backend(backend)
    if not triton_tree:
        monkeypatch.setattr(tree_module, "triton_can_run_on", lambda device: False)
    gen = generator_for(request)
    batch = 2
    q = randn(gen, batch, tree_len, kv_heads * group, head_dim, dtype=dtype).transpose(1, 2)
    key = randn(gen, batch, kv_heads, prefix_len + tree_len, head_dim, dtype=dtype)
    value = randn(gen, batch, kv_heads, prefix_len + tree_len, head_dim, dtype=dtype)
    mask = random_tree_mask(tree_len, gen, batch)
    out = hybrid_tree_attention(q.to(DEVICE), key.to(DEVICE), value.to(DEVICE), mask.to(DEVICE), head_dim**-0.5)
    assert out.shape == (batch, tree_len, kv_heads * group, head_dim) and out.is_contiguous()
    ref_out, ref_lse = reference_attention(q, key, value, head_dim**-0.5, prefix_and_tree_allowed(mask, prefix_len))
    assert_close_attention(out.cpu().transpose(1, 2), None, ref_out, ref_lse, dtype)


class _Attn(torch.nn.Module):
    scaling = 0.2
    num_key_value_groups = 2
    is_causal = True


@needs_triton
def test_attention_function_contract(request):
    """Tree calls ignore the placeholder mask and use module.scaling; others delegate to SDPA."""
    gen = generator_for(request)
    q, key, value = randn(gen, 1, 4, 6, 64), randn(gen, 1, 2, 26, 64), randn(gen, 1, 2, 26, 64)
    mask = random_tree_mask(6, gen)
    placeholder = torch.ones(1, 1, 6, 6, dtype=torch.bool)
    out, weights = longspec_attention_forward(_Attn(), q, key, value, placeholder, longspec_tree_mask=mask)
    assert weights is None and out.shape == (1, 6, 4, 64)
    ref_out, _ = reference_attention(q, key, value, 0.2, prefix_and_tree_allowed(mask, 20))
    assert torch.allclose(out.transpose(1, 2).double(), ref_out, atol=1e-5)
    causal = torch.ones(6, 26, dtype=torch.bool).tril(20)
    out, _ = longspec_attention_forward(_Attn(), q, key, value, causal[None, None], scaling=0.2)
    ref_out, _ = reference_attention(q, key, value, 0.2, causal)
    assert torch.allclose(out.transpose(1, 2).double(), ref_out, atol=1e-5)


# ---- inside a tiny random Llama, against attn_implementation="eager" ----

def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(1234)
    config = LlamaConfig(
        vocab_size=128, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=32, max_position_embeddings=512,
    )
    return LlamaForCausalLM(config).eval()


def _forward(model, attn, input_ids, cache=None, **kwargs):
    """One forward with the given attention; the cache kwarg is `cache` (5.2x) or `past_key_values`."""
    model.set_attn_implementation(attn)
    if cache is not None:
        name = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"
        kwargs[name] = cache
    with torch.no_grad():
        return model(input_ids, use_cache=cache is not None, **kwargs).logits


def _prefilled_cache(model, attn, prefix_ids):
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    _forward(model, attn, prefix_ids, cache=cache)
    return cache


def test_registration_is_idempotent():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    assert register_longspec_attention() == LONGSPEC_ATTENTION == register_longspec_attention()
    assert "flash" not in LONGSPEC_ATTENTION and "sdpa" not in LONGSPEC_ATTENTION
    assert AttentionInterface._global_mapping[LONGSPEC_ATTENTION] is longspec_attention_forward
    assert AttentionMaskInterface._global_mapping[LONGSPEC_ATTENTION] is sdpa_mask


def test_llama_causal_forward_with_padding_matches_eager(request):
    register_longspec_attention()
    model = _tiny_llama()
    gen = generator_for(request)
    ids = torch.randint(0, 128, (2, 23), generator=gen)
    padding = torch.ones(2, 23, dtype=torch.long)
    padding[1, :5] = 0  # left padding in the second row
    eager = _forward(model, "eager", ids, attention_mask=padding)
    hybrid = _forward(model, LONGSPEC_ATTENTION, ids, attention_mask=padding)
    assert torch.allclose(hybrid[0], eager[0], atol=1e-4, rtol=1e-4)
    assert torch.allclose(hybrid[1, 5:], eager[1, 5:], atol=1e-4, rtol=1e-4)
    # plain causal prefill then a 4-token continuation through the cache (masks built by sdpa_mask)
    prefix = ids[:1, :15]
    eager_cache = _prefilled_cache(model, "eager", prefix)
    hybrid_cache = _prefilled_cache(model, LONGSPEC_ATTENTION, prefix)
    eager = _forward(model, "eager", ids[:1, 15:19], cache=eager_cache)
    hybrid = _forward(model, LONGSPEC_ATTENTION, ids[:1, 15:19], cache=hybrid_cache)
    assert torch.allclose(hybrid, eager, atol=1e-4, rtol=1e-4)


@needs_triton
@pytest.mark.parametrize("batch", [1, 2])
def test_llama_tree_forward_matches_eager_with_full_4d_mask(request, batch):
    register_longspec_attention()
    model = _tiny_llama()
    gen = generator_for(request)
    prefix_len, tree_len = 37, 14
    prefix_ids = torch.randint(0, 128, (batch, prefix_len), generator=gen)
    tree_ids = torch.randint(0, 128, (batch, tree_len), generator=gen)
    parents = [random_parents(tree_len, gen) for _ in range(batch)]
    tree_mask = torch.stack([ancestor_or_self_mask(p) for p in parents])  # (B, T, T)
    position_ids = prefix_len + torch.tensor([tree_depths(p) for p in parents])

    full_mask = torch.cat([torch.ones(batch, tree_len, prefix_len, dtype=torch.bool), tree_mask], dim=-1)
    additive = torch.zeros(batch, 1, tree_len, prefix_len + tree_len)
    additive.masked_fill_(~full_mask[:, None], torch.finfo(torch.float32).min)
    eager = _forward(model, "eager", tree_ids, cache=_prefilled_cache(model, "eager", prefix_ids),
                     attention_mask=additive, position_ids=position_ids)

    hybrid_cache = _prefilled_cache(model, LONGSPEC_ATTENTION, prefix_ids)
    placeholder = torch.ones(batch, 1, tree_len, tree_len, dtype=torch.bool)
    hybrid = _forward(model, LONGSPEC_ATTENTION, tree_ids, cache=hybrid_cache, attention_mask=placeholder,
                      position_ids=position_ids, longspec_tree_mask=tree_mask if batch > 1 else tree_mask[0])
    assert hybrid_cache.get_seq_length() == prefix_len + tree_len
    assert torch.isfinite(hybrid).all()
    assert torch.allclose(hybrid, eager, atol=1e-4, rtol=1e-4), (hybrid - eager).abs().max()


CACHED_TREE_CASES = [  # dtype, kv_heads, group, head_dim, tree_len, capacity, prefix lengths per row, splits
    (F32, 2, 3, 64, 7, 700, [300, 611], None),
    (F32, 1, 4, 64, 9, 1200, [1000, 0], 3),
    (BF16, 3, 3, 64, 11, 640, [517, 96], None),
]


@pytest.mark.parametrize("dtype,kv_heads,group,head_dim,tree_len,capacity,lengths,num_splits", CACHED_TREE_CASES)
@pytest.mark.parametrize("kernel", [True, False], ids=["triton", "math"])
def test_cached_tree_attention_reads_only_each_rows_prefix_and_tree(
    request, monkeypatch, dtype, kv_heads, group, head_dim, tree_len, capacity, lengths, num_splits, kernel
):
    """The op captured rounds run: per-row prefix lengths from a device tensor, the tree's K/V right
    after each prefix in a preallocated buffer, every other slot NaN for the kernel (reading one fails;
    the math fallback multiplies masked slots by 0, so it gets large finite garbage there)."""
    if kernel and not triton_can_run_on(DEVICE):
        pytest.skip("Triton cannot run here")
    if not kernel:
        monkeypatch.setattr(tree_module, "TREE_BACKEND", "math")
    if num_splits is not None:
        import hf_longspec.kernels.prefix_splitkv as splitkv

        plan = splitkv.plan_splits
        monkeypatch.setattr(splitkv, "plan_splits", lambda *a, **k: plan(*a[:8], num_splits=num_splits))
    gen = generator_for(request)
    batch = len(lengths)
    q = randn(gen, batch, tree_len, kv_heads * group, head_dim, dtype=dtype).transpose(1, 2)
    stale = float("nan") if kernel else 1e4
    keys = torch.full((batch, kv_heads, capacity, head_dim), stale, dtype=dtype)
    values = torch.full((batch, kv_heads, capacity, head_dim), stale, dtype=dtype)
    mask = random_tree_mask(tree_len, gen, batch)
    ref = []
    for row, length in enumerate(lengths):
        k = randn(gen, 1, kv_heads, length + tree_len, head_dim, dtype=dtype)
        v = randn(gen, 1, kv_heads, length + tree_len, head_dim, dtype=dtype)
        keys[row, :, : length + tree_len], values[row, :, : length + tree_len] = k[0], v[0]
        ref.append(reference_attention(q[row : row + 1], k, v, head_dim**-0.5,
                                       prefix_and_tree_allowed(mask[row : row + 1], length)))
    out = torch.ops.hf_longspec.cached_tree_attention(
        q.to(DEVICE), keys.to(DEVICE), values.to(DEVICE), mask.to(DEVICE), torch.tensor(lengths, device=DEVICE),
        head_dim**-0.5)
    assert out.shape == (batch, tree_len, kv_heads * group, head_dim) and out.is_contiguous()
    ref_out, ref_lse = torch.cat([r[0] for r in ref]), torch.cat([r[1] for r in ref])
    assert_close_attention(out.cpu().transpose(1, 2), None, ref_out, ref_lse, dtype)


@pytest.mark.parametrize("lengths", [[300], [300, 123]], ids=["one row", "rows at other lengths"])
def test_a_plain_steps_root_reads_its_rows_prefix_and_itself_in_one_sdpa_call(request, monkeypatch, lengths):
    """A plain step's tree is the root alone: off the GPU's kernels the attention function answers it with one SDPA
    call, not the custom op (fortieth session). Each row's root sees its own prefix and its own K/V right after it
    (three query heads per KV head, grouped as transformers' SDPA path groups them), never a slot beyond (stale
    slots hold large garbage, which a read would show)."""
    import hf_longspec.attention.hybrid as hybrid

    monkeypatch.setattr(tree_module, "TREE_BACKEND", "math")  # what a CPU call runs
    monkeypatch.setattr(hybrid, "cached_tree_attention", lambda *args: pytest.fail("a one-node tree took the op"))
    gen = generator_for(request)
    batch, kv_heads, group, head_dim, capacity = len(lengths), 2, 3, 64, 400
    q = randn(gen, batch, 1, kv_heads * group, head_dim, dtype=F32).transpose(1, 2)
    keys = torch.full((batch, kv_heads, capacity, head_dim), 1e4)
    values = torch.full((batch, kv_heads, capacity, head_dim), 1e4)
    refs = []
    for row, length in enumerate(lengths):
        k, v = randn(gen, 1, kv_heads, length + 1, head_dim, dtype=F32), randn(gen, 1, kv_heads, length + 1, head_dim, dtype=F32)
        keys[row, :, : length + 1], values[row, :, : length + 1] = k[0], v[0]
        refs.append(reference_attention(q[row : row + 1], k, v, 0.125)[0])
    root_alone = torch.ones(batch, 1, 1, dtype=torch.bool)
    out, _ = longspec_attention_forward(_Attn(), q, keys, values, root_alone[:, None], scaling=0.125,
                                        longspec_tree_mask=root_alone, longspec_prefix_lengths=torch.tensor(lengths))
    assert out.shape == (batch, 1, kv_heads * group, head_dim) and out.is_contiguous()
    assert torch.allclose(out.transpose(1, 2).double(), torch.cat(refs), atol=1e-5)


@pytest.mark.parametrize("tiles", [(16, 32, 4, 2), (32, 16, 4, 3), (64, 32, 4, 3)])
def test_cached_tree_attention_is_the_same_under_every_tiling(request, tiles):
    """benchmarks/attention_tiles.py times tilings the default policy does not pick (row tiles smaller
    than the packed rows, key tiles smaller than a split's tail): they must give the default's result."""
    from hf_longspec.kernels import Tiles, cached_tree_attn

    if not triton_can_run_on(DEVICE):
        pytest.skip("Triton cannot run here")
    gen = generator_for(request)
    q = randn(gen, 2, 8, 9, 64, dtype=F32).to(DEVICE)  # 4 query heads per KV head x 9 tree rows: 36 packed
    keys, values = (randn(gen, 2, 2, 400, 64, dtype=F32).to(DEVICE) for _ in range(2))
    mask = random_tree_mask(9, gen, 2).to(DEVICE)
    lengths = torch.tensor([350, 123], device=DEVICE)
    default, default_lse = cached_tree_attn(q, keys, values, mask, lengths)
    tiled, tiled_lse = cached_tree_attn(q, keys, values, mask, lengths, tiles=Tiles(*tiles), num_splits=5)
    assert torch.allclose(tiled, default, atol=1e-5) and torch.allclose(tiled_lse, default_lse, atol=1e-5)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_a_cpu_call_attends_a_whole_prefix_with_torchs_fused_kernel(request, monkeypatch, dtype):
    """Off CUDA, where every row's prefix is filled alike (batch 1 always), the varlen op runs torch's fused CPU
    flash kernel (2-4x the math at 21 rows over 4k-8k keys), and gives the float64 reference's out and lse; rows of
    unequal lengths take the math under a mask."""
    gen = generator_for(request)
    kv_heads, group, rows, capacity, head_dim = 3, 3, 21, 700, 64
    q = randn(gen, 1, rows, kv_heads * group, head_dim, dtype=dtype).transpose(1, 2)
    keys = randn(gen, 1, kv_heads, capacity, head_dim, dtype=dtype)
    values = randn(gen, 1, kv_heads, capacity, head_dim, dtype=dtype)
    length = 613
    ref_out, ref_lse = reference_attention(q, keys[:, :, :length], values[:, :, :length], head_dim**-0.5)
    math = prefix_module.grouped_attention_math
    monkeypatch.setattr(prefix_module, "grouped_attention_math", lambda *a, **k: pytest.fail("took the math"))
    out, lse = torch.ops.hf_longspec.grouped_prefix_attention_varlen(q, keys, values, torch.tensor([length]),
                                                                     head_dim**-0.5)
    assert out.dtype == lse.dtype == F32 and out.shape == (1, kv_heads, group, rows, head_dim)
    assert_close_attention(out.flatten(1, 2), lse.flatten(1, 2), ref_out, ref_lse, dtype)
    monkeypatch.setattr(prefix_module, "grouped_attention_math", math)
    two = torch.cat([q, q]), torch.cat([keys, keys]), torch.cat([values, values])
    out, lse = torch.ops.hf_longspec.grouped_prefix_attention_varlen(*two, torch.tensor([length, 500]), head_dim**-0.5)
    assert_close_attention(out[:1].flatten(1, 2), lse[:1].flatten(1, 2), ref_out, ref_lse, dtype)
