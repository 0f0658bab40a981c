"""Triton kernel behind :func:`fused_mask_attn`: masked attention among the tree tokens.

One program owns one (batch, KV head) and BLOCK_M packed query rows. The ``g`` query heads of
the KV group are folded into the row axis (row = head_in_group * T + token), so the tree's K/V
of that head are read once for the whole group. The kernel can start from a finished prefix
state (normalised output + log-sum-exp of the same rows over the cached context): that is the
exact LSE merge of the hybrid attention, done in the epilogue instead of another launch.

Query-side tensors (q, out, prefix out) are addressed as 5-D (B, Hkv, g, T, D) through strides,
lse tensors as 4-D (B, Hkv, g, T); any layout whose heads split into (Hkv, g) works unchanged.
"""

import triton
import triton.language as tl

from ._attention_core import attend_tree_keys, finish_rows, packed_row_block


@triton.jit
def tree_attention_kernel(
    Q, K, V, MASK, OUT, LSE, PREFIX_OUT, PREFIX_LSE,
    stride_qb, stride_qh, stride_qg, stride_qt, stride_qd,
    stride_kb, stride_kh, stride_kt, stride_kd,
    stride_vb, stride_vh, stride_vt, stride_vd,
    stride_mb, stride_mq, stride_mk,
    stride_ob, stride_oh, stride_og, stride_ot, stride_od,
    stride_lb, stride_lh, stride_lg, stride_lt,
    stride_pb, stride_ph, stride_pg, stride_pt, stride_pd,
    stride_plb, stride_plh, stride_plg, stride_plt,
    num_kv_heads, tree_len, packed_rows,
    qk_scale_log2,
    HAS_PREFIX: tl.constexpr,
    DOT_IN_FP32: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_D: tl.constexpr,
    HEAD_DIM: tl.constexpr,
):
    b, kvh, head_in_group, token, row_ok, dims, dim_ok = packed_row_block(
        tl.program_id(0), tl.program_id(1), num_kv_heads, tree_len, packed_rows, BLOCK_M, BLOCK_D, HEAD_DIM)
    row_dim_ok = row_ok[:, None] & dim_ok[None, :]

    q_ptrs = (Q + b * stride_qb + kvh * stride_qh + head_in_group[:, None] * stride_qg
              + token[:, None] * stride_qt + dims[None, :] * stride_qd)
    q = tl.load(q_ptrs, mask=row_dim_ok, other=0.0)

    if HAS_PREFIX:
        # Resume from the prefix: its lse is the running max with a running sum of exactly 1.
        plse_ptrs = (PREFIX_LSE + b * stride_plb + kvh * stride_plh + head_in_group * stride_plg
                     + token * stride_plt)
        prefix_lse = tl.load(plse_ptrs, mask=row_ok, other=float("-inf")).to(tl.float32)
        prefix_seen = prefix_lse > float("-inf")
        m_i = tl.where(prefix_seen, prefix_lse * 1.4426950408889634, float("-inf"))
        l_i = tl.where(prefix_seen, 1.0, 0.0)
        po_ptrs = (PREFIX_OUT + b * stride_pb + kvh * stride_ph + head_in_group[:, None] * stride_pg
                   + token[:, None] * stride_pt + dims[None, :] * stride_pd)
        prefix_out = tl.load(po_ptrs, mask=row_dim_ok & prefix_seen[:, None], other=0.0).to(tl.float32)
        acc = tl.where(prefix_seen[:, None], prefix_out, 0.0)
    else:
        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)

    k_base = K + b * stride_kb + kvh * stride_kh
    v_base = V + b * stride_vb + kvh * stride_vh
    m_i, l_i, acc = attend_tree_keys(q, k_base, v_base, MASK + b * stride_mb, token, row_ok, tree_len, dims, dim_ok,
                                     stride_kt, stride_kd, stride_vt, stride_vd, stride_mq, stride_mk, m_i, l_i, acc,
                                     qk_scale_log2, BLOCK_N, DOT_IN_FP32)

    out, lse = finish_rows(m_i, l_i, acc)
    o_ptrs = (OUT + b * stride_ob + kvh * stride_oh + head_in_group[:, None] * stride_og
              + token[:, None] * stride_ot + dims[None, :] * stride_od)
    tl.store(o_ptrs, out.to(OUT.dtype.element_ty), mask=row_dim_ok)
    l_ptrs = LSE + b * stride_lb + kvh * stride_lh + head_in_group * stride_lg + token * stride_lt
    tl.store(l_ptrs, lse, mask=row_ok)
