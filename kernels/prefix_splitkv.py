"""``prefix_attn_splitkv``: unmasked attention of a few query rows over a long cached prefix, with LSE.

Why split the key axis: at tree-verification time there are only T (1..128) query rows per
head, so a kernel that gives each (batch, KV head) one program launches B*Hkv = 8 programs on a
132-SM GPU and reads 128k keys serially. Splitting the keys into chunks gives every SM work;
each chunk writes a float32 partial (out, lse) and a second tiny kernel merges the partials
exactly by log-sum-exp. The GQA group is folded into the query rows, so each KV head is read
from memory once per row block, never copied by ``repeat_kv``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._launch import (
    block_d_for,
    block_m_for,
    cdiv,
    check_attention_inputs,
    dot_in_fp32,
    grouped_view,
    launch_config,
    new_output,
)
from ._runtime import streaming_multiprocessor_count, triton_can_run_on

_MAX_ROW_TILE = 128
_COMBINE_ROW_TILE = 32
# Programs per SM to aim for: more than one keeps loads in flight while another program computes.
_PROGRAMS_PER_SM = 2
# A split shorter than this spends more on its partial write and the merge than it saves.
MIN_KEYS_PER_SPLIT = 256
MAX_SPLITS = 128


def choose_num_splits(key_len: int, programs_per_split: int, sm_count: int) -> int:
    """How many key chunks to launch so that about ``_PROGRAMS_PER_SM`` programs land on each SM."""
    if key_len <= 0:
        return 1
    wanted = cdiv(_PROGRAMS_PER_SM * sm_count, max(1, programs_per_split))
    by_length = max(1, key_len // MIN_KEYS_PER_SPLIT)
    return max(1, min(wanted, by_length, MAX_SPLITS))


class SplitPlan(NamedTuple):
    """How a split-KV launch tiles the work (exposed for benchmarks and logs)."""

    block_m: int
    block_n: int
    row_blocks: int
    num_splits: int
    keys_per_split: int


def plan_splits(
    batch: int, num_q_heads: int, num_kv_heads: int, query_len: int, key_len: int, head_dim: int,
    dtype: torch.dtype, device: torch.device | str, num_splits: int | None = None,
) -> SplitPlan:
    """Tile sizes and key chunks for :func:`prefix_attn_splitkv` on this shape and device."""
    packed_rows = (num_q_heads // num_kv_heads) * query_len
    block_d = block_d_for(head_dim)
    # fp32 or D > 128 tiles are twice as wide: half the rows keep shared memory under ~140 KB.
    wide = dtype == torch.float32 or block_d > 128
    block_m = block_m_for(packed_rows, _MAX_ROW_TILE // 2 if wide else _MAX_ROW_TILE)
    block_n, _, _ = launch_config(dtype, block_d, block_m)
    row_blocks = cdiv(packed_rows, block_m)
    if num_splits is None:
        num_splits = choose_num_splits(key_len, row_blocks * batch * num_kv_heads,
                                       streaming_multiprocessor_count(device))
    keys_per_split = cdiv(cdiv(max(key_len, 1), max(1, num_splits)), block_n) * block_n
    return SplitPlan(block_m, block_n, row_blocks, cdiv(max(key_len, 1), keys_per_split), keys_per_split)


def prefix_attn_splitkv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    *,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    seqlens: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every query row attends every (valid) key; returns ``(out, lse)``.

    Args:
        q: (B, Hq, T, D) queries (any strides).
        k, v: (B, Hkv, S, D) cached keys and values (any strides, may differ); Hq % Hkv == 0.
        scale: softmax scale, default ``D ** -0.5``.
        num_splits: force the number of key chunks (default: from S and the SM count).
        out: optional (B, Hq, T, D) tensor to write into, of q's dtype or float32 (float32 keeps
            the result unrounded for a later merge).
        seqlens: optional (B,) integer device tensor: row b attends only keys [0, seqlens[b]) of a
            preallocated k/v of capacity S. Read by the kernel from memory, never by the host, so
            the launch (and a CUDA graph holding it) is the same for every length.

    Returns:
        out (B, Hq, T, D) in q's dtype (or ``out``'s) and lse (B, Hq, T) float32, natural log.
        With S = 0 every row gets out = 0 and lse = -inf.
    """
    check_attention_inputs(q, k, v)
    batch, num_q_heads, query_len, head_dim = q.shape
    num_kv_heads, key_len = k.shape[1], k.shape[2]
    if not triton_can_run_on(q.device):
        raise RuntimeError(
            f"prefix_attn_splitkv needs Triton on CUDA, or TRITON_INTERPRET=1 for CPU tensors (device {q.device})"
        )
    scale = head_dim**-0.5 if scale is None else float(scale)
    if out is None:
        out = new_output((batch, num_q_heads, query_len, head_dim), q.dtype, q.device)
    elif out.shape != q.shape or out.dtype not in (q.dtype, torch.float32):
        raise ValueError(f"out must be {tuple(q.shape)} of {q.dtype} or float32; got {tuple(out.shape)} of {out.dtype}")
    lse = new_output((batch, num_q_heads, query_len), torch.float32, q.device)
    if seqlens is not None and (seqlens.shape != (batch,) or seqlens.device != q.device or seqlens.is_floating_point()):
        raise ValueError(f"seqlens must be an integer ({batch},) tensor on {q.device}; got {tuple(seqlens.shape)} "
                         f"{seqlens.dtype} on {seqlens.device}")
    if out.numel() == 0 or key_len == 0:
        out.zero_()
        lse.fill_(float("-inf"))
        return out, lse

    from ._attention_core import LOG2E
    from ._prefix_splitkv_kernel import combine_splits_kernel, split_attention_kernel

    packed_rows = (num_q_heads // num_kv_heads) * query_len
    block_d = block_d_for(head_dim)
    plan = plan_splits(batch, num_q_heads, num_kv_heads, query_len, key_len, head_dim, q.dtype, q.device, num_splits)
    block_m, block_n, row_blocks, num_splits, keys_per_split = plan
    _, num_warps, num_stages = launch_config(q.dtype, block_d, block_m)

    q5, o5, l4 = (grouped_view(t, num_kv_heads) for t in (q, out, lse))
    if num_splits == 1:
        part_out, part_lse = o5.unsqueeze(0), l4.unsqueeze(0)
    else:
        part_out = new_output((num_splits, *o5.shape), torch.float32, q.device)
        part_lse = new_output((num_splits, *l4.shape), torch.float32, q.device)

    split_attention_kernel[(row_blocks, batch * num_kv_heads, num_splits)](
        q5, k, v, part_out, part_lse, seqlens if seqlens is not None else lse,
        *q5.stride(), *k.stride(), *v.stride(), *part_out.stride(), *part_lse.stride(),
        num_kv_heads, query_len, key_len, packed_rows, keys_per_split,
        scale * LOG2E,
        HAS_SEQLENS=seqlens is not None,
        DOT_IN_FP32=dot_in_fp32(q.dtype, q.device),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, HEAD_DIM=head_dim,
        num_warps=num_warps, num_stages=num_stages,
    )
    if num_splits > 1:
        combine_rows = block_m_for(packed_rows, _COMBINE_ROW_TILE)
        combine_splits_kernel[(cdiv(packed_rows, combine_rows), batch * num_kv_heads)](
            part_out, part_lse, o5, l4,
            *part_out.stride(), *part_lse.stride(), *o5.stride(), *l4.stride(),
            num_kv_heads, query_len, packed_rows, num_splits,
            BLOCK_M=combine_rows, BLOCK_D=block_d, HEAD_DIM=head_dim,
            num_warps=4,
        )
    return out, lse
