"""Triton kernels behind :func:`prefix_attn_splitkv` and :func:`cached_tree_attn` ("flash-decoding").

``split_attention_kernel``: one program per (row block, batch x KV head, key split) attends its
packed query rows (GQA group folded into rows) to one contiguous slice of the keys, with no
mask, and writes a float32 partial (normalised out, lse). With a single split it writes the
final output directly. With ``HAS_SEQLENS`` the number of valid keys of each batch row is read
from a device tensor, so a preallocated cache of fixed capacity can be read by one launch
shape whatever its fill (what CUDA-graph replay needs). With ``HAS_WINDOW`` a row of length L reads
only its first ``anchors`` keys and its newest ``newest`` ones (a draft's ``cross_attention_window``):
the splits cover min(L, anchors + newest) keys, the ones past the anchors moved up to end at L, so the
work is constant in L and nothing is gathered. With a tree (``tree_split`` < the
grid's split count) one more split, the last, attends the T tree tokens, which sit right after
each row's prefix in the same buffer, under the ancestor-or-self mask: prefix and tree are one
launch, merged by the combine below.

``combine_splits_kernel``: merges the partials of each packed row exactly by log-sum-exp. One
program per (row, batch x KV head) loads BLOCK_S partials at once: a serial loop over the splits
was latency-bound (47 us per launch for SmolLM2 at 8k on the H200, a third of the verification).
"""

import triton
import triton.language as tl

from ._attention_core import attend_key_block, attend_tree_keys, finish_rows, packed_row_block


@triton.jit
def split_attention_kernel(
    Q, K, V, OUT, LSE, SEQLENS, MASK,
    stride_qb, stride_qh, stride_qg, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_os, stride_ob, stride_oh, stride_og, stride_ot, stride_od,
    stride_ls, stride_lb, stride_lh, stride_lg, stride_lt,
    stride_mb, stride_mq, stride_mk,
    num_kv_heads, query_len, key_len, packed_rows, keys_per_split, tree_split,
    qk_scale_log2, anchors, newest,
    HAS_SEQLENS: tl.constexpr,
    HAS_WINDOW: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    split = tl.program_id(2)
    b, kvh, head_in_group, token, row_ok, dims, dim_ok = packed_row_block(
        tl.program_id(0), tl.program_id(1), num_kv_heads, query_len, packed_rows, BLOCK_M, BLOCK_D, HEAD_DIM)
    row_dim_ok = row_ok[:, None] & dim_ok[None, :]

    q_ptrs = (Q + b * stride_qb + kvh * stride_qh + head_in_group[:, None] * stride_qg
              + token[:, None] * stride_qt + dims[None, :] * stride_qd)
    q = tl.load(q_ptrs, mask=row_dim_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    if HAS_SEQLENS:  # per-row valid length read from memory: one launch (or graph) serves every length
        key_len = tl.load(SEQLENS + b).to(tl.int32)
    if split == tree_split:  # never true without a tree: the host passes the grid's split count
        # The tree split: keys [key_len, key_len + T) are the tree tokens (written there by this very
        # forward), each query row sees its ancestors and itself.
        # tl.cast, not .to(): Triton passes an int argument equal to 1 as a constant (a Python int)
        tree_start = tl.cast(key_len, tl.int64)
        k_base = K + b * stride_kb + kvh * stride_kh + tree_start * stride_kt
        v_base = V + b * stride_vb + kvh * stride_vh + tree_start * stride_vt
        m_i, l_i, acc = attend_tree_keys(q, k_base, v_base, MASK + b * stride_mb, token, row_ok, query_len, dims,
                                         dim_ok, stride_kt, stride_kd, stride_vt, stride_vd, stride_mq, stride_mk,
                                         m_i, l_i, acc, qk_scale_log2, BLOCK_N, DOT_IN_FP32)
    else:
        # This split's keys [lo, lo + split_len); offsets inside it stay small, the base is 64-bit.
        # A split past the row's length sees no key and writes (0, -inf), which the merge ignores.
        if HAS_WINDOW:  # keys [0, anchors) then [L - newest, L): key j >= anchors sits `skipped` further on
            skipped = tl.maximum(key_len - anchors - newest, 0)
            key_len = tl.minimum(key_len, anchors + newest)
        lo = split * keys_per_split
        split_len = tl.minimum(keys_per_split, key_len - lo)
        k_base = K + b * stride_kb + kvh * stride_kh + lo.to(tl.int64) * stride_kt
        v_base = V + b * stride_vb + kvh * stride_vh + lo.to(tl.int64) * stride_vt
        for start in range(0, split_len, BLOCK_N):
            cols = start + tl.arange(0, BLOCK_N)
            col_ok = cols < split_len
            if HAS_WINDOW:
                cols = cols + tl.where(lo + cols >= anchors, skipped, 0)
            m_i, l_i, acc = attend_key_block(q, k_base, v_base, cols, col_ok, dims, dim_ok, col_ok[None, :],
                                             stride_kt, stride_kd, stride_vt, stride_vd, m_i, l_i, acc,
                                             qk_scale_log2, DOT_IN_FP32)

    out, lse = finish_rows(m_i, l_i, acc)
    split64 = split.to(tl.int64)
    o_ptrs = (OUT + split64 * stride_os + b * stride_ob + kvh * stride_oh + head_in_group[:, None] * stride_og
              + token[:, None] * stride_ot + dims[None, :] * stride_od)
    tl.store(o_ptrs, out.to(OUT.dtype.element_ty), mask=row_dim_ok)
    l_ptrs = (LSE + split64 * stride_ls + b * stride_lb + kvh * stride_lh + head_in_group * stride_lg
              + token * stride_lt)
    tl.store(l_ptrs, lse, mask=row_ok)


@triton.jit
def combine_splits_kernel(
    PART_OUT, PART_LSE, OUT, LSE,
    stride_ps, stride_pb, stride_ph, stride_pg, stride_pt, stride_pd,
    stride_pls, stride_plb, stride_plh, stride_plg, stride_plt,
    stride_ob, stride_oh, stride_og, stride_ot, stride_od,
    stride_lb, stride_lh, stride_lg, stride_lt,
    num_kv_heads, query_len, num_splits,
    BLOCK_S: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    row = tl.program_id(0)  # one packed row: head_in_group * query_len + token
    batch_head = tl.program_id(1)
    b = (batch_head // num_kv_heads).to(tl.int64)
    kvh = (batch_head % num_kv_heads).to(tl.int64)
    head_in_group, token = row // query_len, row % query_len
    dims = tl.arange(0, BLOCK_D)
    dim_ok = dims < HEAD_DIM
    splits = tl.arange(0, BLOCK_S)

    po_base = PART_OUT + b * stride_pb + kvh * stride_ph + head_in_group * stride_pg + token * stride_pt
    pl_base = PART_LSE + b * stride_plb + kvh * stride_plh + head_in_group * stride_plg + token * stride_plt
    # Each partial acts as one "key" whose base-2 score is its lse and whose value is its output;
    # BLOCK_S of them are merged per step (one step unless there are more splits than BLOCK_S).
    m_i = tl.full([1], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([1], dtype=tl.float32)
    acc = tl.zeros([1, BLOCK_D], dtype=tl.float32)
    for first in range(0, num_splits, BLOCK_S):
        index = first + splits
        split_ok = index < num_splits
        s = tl.load(pl_base + index.to(tl.int64) * stride_pls, mask=split_ok, other=float("-inf"))
        s = s * 1.4426950408889634  # (S,) base-2
        part = tl.load(po_base + index.to(tl.int64)[:, None] * stride_ps + dims[None, :] * stride_pd,
                       mask=split_ok[:, None] & dim_ok[None, :], other=0.0)  # (S, D)
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_base = tl.where(m_new == float("-inf"), 0.0, m_new)
        w = tl.exp2(s - m_base)  # (S,); -inf partials weigh 0
        alpha = tl.exp2(m_i - m_base)
        l_i = l_i * alpha + tl.sum(w, 0)
        acc = acc * alpha[:, None] + tl.sum(w[:, None] * part, 0)[None, :]
        m_i = m_new

    out, lse = finish_rows(m_i, l_i, acc)
    o_ptrs = (OUT + b * stride_ob + kvh * stride_oh + head_in_group * stride_og + token * stride_ot
              + dims[None, :] * stride_od)
    tl.store(o_ptrs, out.to(OUT.dtype.element_ty), mask=dim_ok[None, :])
    l_ptrs = LSE + b * stride_lb + kvh * stride_lh + head_in_group * stride_lg + token * stride_lt + tl.arange(0, 1)
    tl.store(l_ptrs, lse)
