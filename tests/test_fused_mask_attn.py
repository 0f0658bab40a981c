"""Triton kernels against float64: fused_mask_attn (tree) and prefix_attn_splitkv (cached prefix).

On machines without CUDA they run on Triton's CPU interpreter (conftest sets TRITON_INTERPRET).
Every kernel output is allocated NaN-poisoned, so an element the kernel never writes fails.
"""

import os
import subprocess
import sys

import pytest
import torch

from attention_reference import (
    assert_close_attention,
    generator_for,
    prefix_and_tree_allowed,
    randn,
    random_tree_mask,
    reference_attention,
)

pytest.importorskip("triton")

import hf_longspec.kernels._launch as launch  # noqa: E402
from hf_longspec.kernels import (  # noqa: E402
    choose_num_splits,
    fused_mask_attn,
    plan_splits,
    prefix_attn_splitkv,
    triton_can_run_on,
)

F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    monkeypatch.setattr(launch, "POISON_OUTPUTS", True)
    if not triton_can_run_on(DEVICE):
        pytest.skip("Triton cannot run here (no CUDA and TRITON_INTERPRET unset)")


def strided_qkv(gen, batch, kv_heads, group, length, head_dim, dtype, extra_keys=0):
    """Non-contiguous inputs: q a transposed (B, T, Hq, D) projection like a model's, k a slice of a
    longer cache stored dim-major, v every other row of a (B, L, Hkv, D) buffer. Every stride of
    k differs from v's, so a k/v stride mix-up cannot pass."""
    q = randn(gen, batch, length, kv_heads * group, head_dim, dtype=dtype).transpose(1, 2)
    k = randn(gen, batch, kv_heads, head_dim, extra_keys + length, dtype=dtype).transpose(2, 3)[:, :, extra_keys:]
    v = randn(gen, batch, 2 * length, kv_heads, head_dim, dtype=dtype)[:, ::2].transpose(1, 2)
    return q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)


def contiguous_qkv(gen, batch, kv_heads, group, length, head_dim, dtype, scale=1.0):
    q = randn(gen, batch, kv_heads * group, length, head_dim, dtype=dtype, scale=scale)
    k = randn(gen, batch, kv_heads, length, head_dim, dtype=dtype, scale=scale)
    v = randn(gen, batch, kv_heads, length, head_dim, dtype=dtype)
    return q.to(DEVICE), k.to(DEVICE), v.to(DEVICE)


# dtype, batch, kv heads, group (Hq / Hkv), tree length T, head dim, one tree per batch row
TREE_CASES = [
    (F32, 1, 2, 1, 1, 64, False),
    (F32, 2, 1, 3, 69, 128, True),
    (F16, 1, 2, 4, 7, 64, False),
    (F16, 1, 1, 8, 130, 128, False),
    (F16, 1, 1, 4, 256, 64, False),
    (BF16, 2, 2, 4, 33, 128, True),
    (BF16, 1, 1, 3, 130, 64, False),
    (F32, 1, 1, 2, 20, 80, False),  # head dim not a power of two: padded lanes are masked
]


@pytest.mark.parametrize("dtype,batch,kv_heads,group,tree_len,head_dim,per_batch", TREE_CASES)
def test_tree_attention_matches_float64(request, dtype, batch, kv_heads, group, tree_len, head_dim, per_batch):
    gen = generator_for(request)
    q, k, v = strided_qkv(gen, batch, kv_heads, group, tree_len, head_dim, dtype, extra_keys=5)
    mask = random_tree_mask(tree_len, gen, batch if per_batch else None)
    out, lse = fused_mask_attn(q, k, v, mask.to(DEVICE))
    assert out.shape == q.shape and out.dtype == dtype
    assert lse.shape == q.shape[:3] and lse.dtype == torch.float32
    ref_out, ref_lse = reference_attention(q.cpu(), k.cpu(), v.cpu(), head_dim**-0.5, mask)
    assert_close_attention(out.cpu(), lse.cpu(), ref_out, ref_lse, dtype)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_tree_attention_peaky_scores_contiguous_inputs_and_out_buffer(request, dtype):
    """Large scores (softmax near one-hot) stress the running max; ``out=`` may be any layout."""
    gen = generator_for(request)
    q, k, v = contiguous_qkv(gen, 1, 2, 4, 45, 64, dtype, scale=3.0)
    mask = random_tree_mask(45, gen)
    buffer = torch.full((1, 45, 8, 64), float("nan"), dtype=dtype, device=DEVICE).transpose(1, 2)
    out, lse = fused_mask_attn(q, k, v, mask.to(DEVICE), scale=0.3, out=buffer)
    assert out.data_ptr() == buffer.data_ptr()
    ref_out, ref_lse = reference_attention(q.cpu(), k.cpu(), v.cpu(), 0.3, mask)
    assert_close_attention(out.cpu(), lse.cpu(), ref_out, ref_lse, dtype)


def test_row_with_no_allowed_key_gives_zero_and_minus_inf(request):
    gen = generator_for(request)
    q, k, v = contiguous_qkv(gen, 1, 1, 3, 9, 64, F32)
    mask = random_tree_mask(9, gen)
    mask[4] = False
    out, lse = fused_mask_attn(q, k, v, mask.to(DEVICE))
    ref_out, ref_lse = reference_attention(q.cpu(), k.cpu(), v.cpu(), 64**-0.5, mask)
    assert_close_attention(out.cpu(), lse.cpu(), ref_out, ref_lse, F32)
    assert torch.all(lse[:, :, 4] == float("-inf")) and torch.all(out[:, :, 4] == 0)


@pytest.mark.parametrize("dtype,prefix_len,grouped", [(F32, 40, False), (BF16, 300, True), (F16, 0, True)])
def test_tree_kernel_resumes_from_prefix_state_exactly(request, dtype, prefix_len, grouped):
    """With prefix (out, lse) the kernel equals attention over prefix + tree keys (the fused LSE merge)."""
    gen = generator_for(request)
    batch, kv_heads, group, tree_len, head_dim = 2, 2, 3, 17, 64
    q, k_tree, v_tree = contiguous_qkv(gen, batch, kv_heads, group, tree_len, head_dim, dtype)
    k_prefix = randn(gen, batch, kv_heads, prefix_len, head_dim, dtype=dtype)
    v_prefix = randn(gen, batch, kv_heads, prefix_len, head_dim, dtype=dtype)
    mask = random_tree_mask(tree_len, gen)
    scale = head_dim**-0.5
    prefix_out, prefix_lse = reference_attention(q.cpu(), k_prefix, v_prefix, scale)
    prefix_out, prefix_lse = prefix_out.to(dtype), prefix_lse.float()
    if grouped:
        prefix_out, prefix_lse = prefix_out.unflatten(1, (kv_heads, group)), prefix_lse.unflatten(1, (kv_heads, group))
    out, lse = fused_mask_attn(q, k_tree, v_tree, mask.to(DEVICE), scale,
                               prefix_out=prefix_out.to(DEVICE), prefix_lse=prefix_lse.to(DEVICE))
    keys = torch.cat([k_prefix, k_tree.cpu()], dim=2)
    values = torch.cat([v_prefix, v_tree.cpu()], dim=2)
    ref_out, ref_lse = reference_attention(q.cpu(), keys, values, scale, prefix_and_tree_allowed(mask, prefix_len))
    assert_close_attention(out.cpu(), lse.cpu(), ref_out, ref_lse, dtype)


def test_tree_kernel_rejects_bad_inputs():
    q = torch.zeros(1, 4, 5, 64, device=DEVICE)
    k = torch.zeros(1, 3, 5, 64, device=DEVICE)
    with pytest.raises(ValueError, match="multiple"):
        fused_mask_attn(q, k, k, torch.ones(5, 5, dtype=torch.bool))
    k = torch.zeros(1, 2, 5, 64, device=DEVICE)
    with pytest.raises(ValueError, match="tree_mask"):
        fused_mask_attn(q, k, k, torch.ones(4, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="dtype"):
        fused_mask_attn(q.double(), k.double(), k.double(), torch.ones(5, 5, dtype=torch.bool))


# dtype, batch, kv heads, group, query rows T, head dim, prefix length S, forced split count
SPLIT_CASES = [
    (F32, 1, 2, 1, 1, 64, 0, None),
    (F32, 1, 1, 4, 5, 128, 1, None),
    (F16, 1, 2, 3, 16, 64, 300, None),
    (BF16, 2, 1, 8, 3, 128, 257, None),
    (F32, 1, 1, 2, 7, 64, 2500, 7),
    (F16, 1, 1, 4, 16, 128, 4100, None),
]


@pytest.mark.parametrize("dtype,batch,kv_heads,group,query_len,head_dim,prefix_len,num_splits", SPLIT_CASES)
def test_splitkv_prefix_matches_float64(request, dtype, batch, kv_heads, group, query_len, head_dim, prefix_len,
                                        num_splits):
    gen = generator_for(request)
    q = randn(gen, batch, query_len, kv_heads * group, head_dim, dtype=dtype).transpose(1, 2).to(DEVICE)
    k = randn(gen, batch, kv_heads, prefix_len + 3, head_dim, dtype=dtype)[:, :, :prefix_len].to(DEVICE)
    v = randn(gen, batch, 2 * prefix_len, kv_heads, head_dim, dtype=dtype)[:, ::2].transpose(1, 2).to(DEVICE)
    out, lse = prefix_attn_splitkv(q, k, v, num_splits=num_splits)
    assert out.shape == q.shape and out.dtype == dtype and lse.dtype == torch.float32
    ref_out, ref_lse = reference_attention(q.cpu(), k.cpu(), v.cpu(), head_dim**-0.5)
    assert_close_attention(out.cpu(), lse.cpu(), ref_out, ref_lse, dtype)
    if prefix_len == 0:
        assert torch.all(out == 0) and torch.all(lse == float("-inf"))


# dtype, forced split count, window (anchors, newest), each row's length in a buffer of 300 keys
WINDOW_CASES = [
    (F32, None, (4, 100), (0, 3, 60, 104, 105, 300)),  # empty, inside the anchors, whole, one past, far past
    (F32, 3, (4, 100), (300, 150, 104, 7, 290, 1)),  # splits that straddle the anchors' end
    (F16, 7, (1, 37), (300, 38, 39, 2, 250, 64)),
    (BF16, None, (0, 64), (300, 64, 65, 1, 200, 128)),  # no anchors: the newest keys alone
]


@pytest.mark.parametrize("dtype,num_splits,window,lengths", WINDOW_CASES)
def test_splitkv_window_reads_the_anchors_and_the_newest_keys_of_each_row(request, dtype, num_splits, window, lengths):
    """A draft's cross_attention_window read without a copy: row b attends keys [0, anchors) and the newest
    `newest` of its [0, L_b) (all of them when L_b <= anchors + newest), under one launch for every length."""
    gen = generator_for(request)
    batch, capacity, (anchors, newest) = len(lengths), 300, window
    q, k, v = strided_qkv(gen, batch, 2, 3, capacity, 64, dtype)
    q = q[:, :, :5]  # 5 query rows (drafted nodes) against a 300-key buffer
    seqlens = torch.tensor(lengths, device=DEVICE)
    out, lse = prefix_attn_splitkv(q, k, v, num_splits=num_splits, seqlens=seqlens, window=window)
    position = torch.arange(capacity)[None, :]
    filled = seqlens.cpu()[:, None]
    allowed = (position < filled) & ((position < anchors) | (position >= filled - newest))  # (B, S)
    ref_out, ref_lse = reference_attention(q.cpu(), k.cpu(), v.cpu(), 64**-0.5, allowed[:, None, None, :])
    assert_close_attention(out.cpu(), lse.cpu(), ref_out, ref_lse, dtype)
    empty = seqlens == 0  # a row with nothing committed reads nothing
    assert torch.all(out[empty] == 0) and torch.all(lse[empty] == float("-inf"))
    for bad in ((4,), (4, 0), (-1, 8), (4, True)):
        with pytest.raises(ValueError, match="window must be"):
            prefix_attn_splitkv(q, k, v, seqlens=seqlens, window=bad)


def test_windowed_prefix_op_reads_through_the_kernel_as_its_math_fallback_does(monkeypatch):
    """attention/prefix.py: the draft's windowed cross-attention op gives the same (out, lse) through the split-KV
    kernel (its CUDA path: compiled on a GPU, elsewhere on the interpreter) as through the float32 math other devices
    use, in the grouped layout; and it is a well-formed custom op (fake version, schema) for torch.compile."""
    from hf_longspec.attention import prefix

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(3, 6, 4, 64, generator=gen).to(DEVICE)  # 3 rows, 6 query heads over 2 KV heads, 4 nodes
    k, v = (torch.randn(3, 2, 200, 64, generator=gen).to(DEVICE) for _ in range(2))
    lengths = torch.tensor([200, 37, 90], device=DEVICE)
    math_out, math_lse = prefix.grouped_prefix_attention_window(q, k, v, lengths, 0.125, 4, 40)
    monkeypatch.setattr(prefix, "_on_cuda_kernels", lambda q: True)
    kernel_out, kernel_lse = prefix.grouped_prefix_attention_window(q, k, v, lengths, 0.125, 4, 40)
    assert kernel_out.shape == math_out.shape == (3, 2, 3, 4, 64)
    torch.testing.assert_close(kernel_out, math_out, atol=2e-5, rtol=2e-5)
    torch.testing.assert_close(kernel_lse, math_lse, atol=2e-5, rtol=2e-5)
    monkeypatch.undo()
    torch.library.opcheck(prefix.grouped_prefix_attention_window, (q, k, v, lengths, 0.125, 4, 40),
                          test_utils=("test_schema", "test_faketensor"))


def test_split_count_fills_the_gpu_and_respects_short_prefixes():
    h200_sms = 132
    assert choose_num_splits(0, 8, h200_sms) == 1
    assert choose_num_splits(100, 8, h200_sms) == 1
    assert choose_num_splits(8192, 8, h200_sms) == 32  # 8k keys / 256 per split
    assert choose_num_splits(131072, 8, h200_sms) == 33  # 264 programs = 2 per SM
    assert choose_num_splits(131072, 64, h200_sms) == 4  # rounded down: 320 programs would leave a ragged wave
    assert choose_num_splits(32768, 32, h200_sms) == 8  # batch 4 x 8 KV heads: 256 programs, not 288
    assert choose_num_splits(10**7, 1, h200_sms) == 128  # capped


def test_rows_that_fit_one_row_tile_are_not_split_in_two():
    """Every row tile reads its row's whole KV: 17 tree rows x 4 heads (68 rows) at 128k took 406 us per
    layer in two 64-row tiles against 190 in one 128-row tile on the H200; past 128 rows a small launch
    still takes 64-row tiles (SmolLM2's 207 rows)."""
    eight_b = plan_splits(1, 32, 8, 17, 130560, 128, torch.bfloat16, "cpu", num_splits=1)
    assert (eight_b.block_m, eight_b.row_blocks) == (128, 1)
    smollm2 = plan_splits(1, 9, 3, 69, 8192, 64, torch.bfloat16, "cpu", num_splits=1)
    assert (smollm2.block_m, smollm2.row_blocks) == (64, 4)
    fifteen_nodes = plan_splits(1, 32, 8, 16, 130560, 128, torch.bfloat16, "cpu", num_splits=1)
    assert (fifteen_nodes.block_m, fifteen_nodes.block_n, fifteen_nodes.row_blocks) == (64, 32, 1)


# Compiles (no GPU needed: Triton's codegen plus the bundled ptxas) the kernels exactly as the H200
# runs them: catches what the CPU interpreter accepts but the compiler rejects.
_COMPILE_FOR_SM90 = r"""
import inspect, sys
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from hf_longspec.kernels._fused_mask_attn_kernel import tree_attention_kernel
from hf_longspec.kernels._prefix_splitkv_kernel import combine_splits_kernel, split_attention_kernel

def compile_sm90(kernel, pointers, constexprs, **options):
    scalar = lambda name: "fp32" if name == "qk_scale_log2" else "i32"
    signature = {name: "constexpr" if name in constexprs else pointers.get(name, scalar(name))
                 for name in inspect.signature(kernel.fn).parameters}
    source = ASTSource(kernel, signature, constexprs=constexprs)
    triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)

bf16 = dict(Q="*bf16", K="*bf16", V="*bf16")
tree_pointers = dict(bf16, MASK="*u8", OUT="*bf16", LSE="*fp32", PREFIX_OUT="*bf16", PREFIX_LSE="*fp32")
compile_sm90(tree_attention_kernel, tree_pointers,
             dict(HAS_PREFIX=True, DOT_IN_FP32=False, BLOCK_M=64, BLOCK_N=64, BLOCK_D=128, HEAD_DIM=128),
             num_warps=4, num_stages=3)
for has_seqlens in (False, True):  # True: lengths read from memory, as in captured rounds
    compile_sm90(split_attention_kernel, dict(bf16, OUT="*fp32", LSE="*fp32", SEQLENS="*i64", MASK="*u8"),
                 dict(HAS_SEQLENS=has_seqlens, HAS_WINDOW=False, DOT_IN_FP32=False, BLOCK_M=128, BLOCK_N=64, BLOCK_D=128, HEAD_DIM=128),
                 num_warps=8, num_stages=3)
compile_sm90(split_attention_kernel, dict(bf16, OUT="*fp32", LSE="*fp32", SEQLENS="*i64", MASK="*u8"),
             dict(HAS_SEQLENS=True, HAS_WINDOW=False, DOT_IN_FP32=False, BLOCK_M=64, BLOCK_N=32, BLOCK_D=128, HEAD_DIM=128),
             num_warps=4, num_stages=3)  # the tiles of 64 packed rows or fewer at head dim 128
# Triton passes an integer argument equal to 1 as a constant (a Python int inside the kernel): a prefix
# of one key must compile too (it did not, once: ``key_len.to(...)`` on an int).
compile_sm90(split_attention_kernel, dict(bf16, OUT="*fp32", LSE="*fp32", SEQLENS="*i64", MASK="*u8"),
             dict(key_len=1, HAS_SEQLENS=False, HAS_WINDOW=False, DOT_IN_FP32=False, BLOCK_M=128, BLOCK_N=64, BLOCK_D=128, HEAD_DIM=128),
             num_warps=8, num_stages=3)
compile_sm90(split_attention_kernel, dict(bf16, OUT="*fp32", LSE="*fp32", SEQLENS="*i64", MASK="*u8"),
             dict(HAS_SEQLENS=True, HAS_WINDOW=True, DOT_IN_FP32=False, BLOCK_M=64, BLOCK_N=64, BLOCK_D=64, HEAD_DIM=64),
             num_warps=4, num_stages=3)  # a draft's cross_attention_window (SmolLM2's head dim)
compile_sm90(split_attention_kernel, dict(bf16, OUT="*fp32", LSE="*fp32", SEQLENS="*i64", MASK="*u8"),
             dict(anchors=1, newest=1, HAS_SEQLENS=True, HAS_WINDOW=True, DOT_IN_FP32=False, BLOCK_M=64, BLOCK_N=64,
                  BLOCK_D=64, HEAD_DIM=64), num_warps=4, num_stages=3)  # window sizes of 1 arrive as constants
compile_sm90(combine_splits_kernel, dict(PART_OUT="*fp32", PART_LSE="*fp32", OUT="*bf16", LSE="*fp32"),
             dict(BLOCK_S=32, BLOCK_D=128, HEAD_DIM=128), num_warps=4)
print("compiled for sm_90 with triton", triton.__version__)
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the tests above run compiled kernels")
def test_kernels_compile_for_h200_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    run = subprocess.run([sys.executable, "-c", _COMPILE_FOR_SM90], env=env, capture_output=True, text=True,
                         timeout=300)
    if run.returncode != 0 and "ptxas" in run.stderr and "not found" in run.stderr.lower():
        pytest.skip("this Triton build has no CUDA toolchain")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "compiled for sm_90" in run.stdout
