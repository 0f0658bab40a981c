"""Triton building blocks shared by the attention kernels: one online-softmax step and the epilogue.

Scores are kept in base-2 units (``qk * scale * log2(e)``) so the inner loop uses ``exp2``; the
log-sum-exp leaves the kernels in natural-log units. ``-inf`` marks a key a row may not see.
A running maximum of ``-inf`` (nothing seen yet) is replaced by 0 before subtracting, so
``-inf - -inf`` never produces NaN and empty rows stay exactly empty.
"""

import triton
import triton.language as tl

# Host-side constant (jit code may only read constexpr globals, so the kernels inline theirs).
LOG2E = 1.4426950408889634


@triton.jit
def packed_row_block(row_block, batch_head, num_kv_heads, rows_per_head, packed_rows,
                     BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, HEAD_DIM: tl.constexpr):
    """Which (batch, KV head) a program serves and its BLOCK_M packed query rows.

    The g query heads of a KV group are folded into rows: row = head_in_group * rows_per_head + token.
    Returns (b, kvh, head_in_group, token, row_ok, dims, dim_ok); b and kvh are int64 for addressing.
    """
    b = (batch_head // num_kv_heads).to(tl.int64)
    kvh = (batch_head % num_kv_heads).to(tl.int64)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, BLOCK_D)
    return b, kvh, rows // rows_per_head, rows % rows_per_head, rows < packed_rows, dims, dims < HEAD_DIM


@triton.jit
def scores_log2(q, k_t, qk_scale_log2, DOT_IN_FP32: tl.constexpr):
    """``q @ k_t`` in float32, scaled into base-2 units.

    DOT_IN_FP32 multiplies float32 operands in IEEE precision (no TF32): set for fp32 inputs,
    and for bf16 under the CPU interpreter, whose ``tl.dot`` cannot multiply bf16.
    """
    if DOT_IN_FP32:
        s = tl.dot(q.to(tl.float32), k_t.to(tl.float32), input_precision="ieee")
    else:
        s = tl.dot(q, k_t)
    return s * qk_scale_log2


@triton.jit
def online_softmax_step(s, v, m_i, l_i, acc, DOT_IN_FP32: tl.constexpr):
    """Fold one key block into the running (max, sum, unnormalised output) of each row.

    ``s``: (M, N) base-2 scores with -inf where masked; ``v``: (N, D) values of that block.
    The probabilities meet V in V's dtype (the usual flash-attention rounding) unless DOT_IN_FP32.
    """
    m_new = tl.maximum(m_i, tl.max(s, 1))
    m_base = tl.where(m_new == float("-inf"), 0.0, m_new)
    p = tl.exp2(s - m_base[:, None])
    alpha = tl.exp2(m_i - m_base)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    if DOT_IN_FP32:
        acc = tl.dot(p, v.to(tl.float32), acc, input_precision="ieee")
    else:
        acc = tl.dot(p.to(v.dtype), v, acc)
    return m_new, l_i, acc


@triton.jit
def attend_key_block(q, k_base, v_base, cols, col_ok, dims, dim_ok, allowed,
                     stride_kt, stride_kd, stride_vt, stride_vd, m_i, l_i, acc, qk_scale_log2,
                     DOT_IN_FP32: tl.constexpr):
    """Load the keys and values at ``cols`` and fold them into the running softmax state.

    ``allowed``: (M, N) or (1, N) booleans, the keys each row may see (at least ``col_ok``).
    """
    k_t = tl.load(k_base + cols[None, :] * stride_kt + dims[:, None] * stride_kd,
                  mask=dim_ok[:, None] & col_ok[None, :], other=0.0)
    s = scores_log2(q, k_t, qk_scale_log2, DOT_IN_FP32)
    s = tl.where(allowed, s, float("-inf"))
    v = tl.load(v_base + cols[:, None] * stride_vt + dims[None, :] * stride_vd,
                mask=col_ok[:, None] & dim_ok[None, :], other=0.0)
    return online_softmax_step(s, v, m_i, l_i, acc, DOT_IN_FP32)


@triton.jit
def attend_tree_keys(q, k_base, v_base, mask_base, token, row_ok, tree_len, dims, dim_ok,
                     stride_kt, stride_kd, stride_vt, stride_vd, stride_mq, stride_mk, m_i, l_i, acc,
                     qk_scale_log2, BLOCK_N: tl.constexpr, DOT_IN_FP32: tl.constexpr):
    """Fold the ``tree_len`` tree keys at ``k_base``/``v_base`` into the running state, each query row
    seeing the keys its (tree_len, tree_len) mask row allows (its ancestors and itself)."""
    for start in range(0, tree_len, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        col_ok = cols < tree_len
        allowed = tl.load(mask_base + token[:, None] * stride_mq + cols[None, :] * stride_mk,
                          mask=row_ok[:, None] & col_ok[None, :], other=0) != 0
        m_i, l_i, acc = attend_key_block(q, k_base, v_base, cols, col_ok, dims, dim_ok, allowed,
                                         stride_kt, stride_kd, stride_vt, stride_vd, m_i, l_i, acc,
                                         qk_scale_log2, DOT_IN_FP32)
    return m_i, l_i, acc


@triton.jit
def finish_rows(m_i, l_i, acc):
    """Normalise the running state: (out, lse in natural log). Rows that saw nothing: (0, -inf)."""
    seen = l_i > 0.0
    out = acc / tl.where(seen, l_i, 1.0)[:, None]
    out = tl.where(seen[:, None], out, 0.0)
    lse = tl.where(seen, (m_i + tl.log2(tl.where(seen, l_i, 1.0))) * 0.6931471805599453, float("-inf"))
    return out, lse
