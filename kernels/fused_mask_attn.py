"""``fused_mask_attn``: attention among the T tree tokens under an ancestor-or-self mask, with LSE.

This is the "tree" half of LongSpec's hybrid tree attention. The tree is small (T <= a few
hundred), so one kernel computes QK^T, applies the boolean mask, runs the softmax and multiplies
by V without materialising anything, for all query heads of a KV group at once (GQA packed into
the row axis, no ``repeat_kv`` copy). It also returns the log-sum-exp so the result can be merged
exactly with attention over the cached prefix, or it merges that prefix in its epilogue when
``prefix_out``/``prefix_lse`` are given.
"""

from __future__ import annotations

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
from ._runtime import triton_can_run_on

_MAX_ROW_TILE = 64


def _batched_mask(tree_mask: torch.Tensor, batch: int, tree_len: int, device: torch.device) -> torch.Tensor:
    """(T, T) or (B|1, T, T) boolean mask -> (B|1, T, T) uint8 view the kernel can load."""
    if tree_mask.dim() == 2:
        tree_mask = tree_mask.unsqueeze(0)
    if tree_mask.dim() != 3 or tree_mask.shape[1:] != (tree_len, tree_len) or tree_mask.shape[0] not in (1, batch):
        raise ValueError(
            f"tree_mask must be (T, T) or (B, T, T) with T={tree_len}, B={batch}; got {tuple(tree_mask.shape)}"
        )
    if tree_mask.dtype != torch.bool:
        tree_mask = tree_mask != 0
    return tree_mask.to(device).view(torch.uint8)


def fused_mask_attn(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    tree_mask: torch.Tensor,
    scale: float | None = None,
    *,
    prefix_out: torch.Tensor | None = None,
    prefix_lse: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Masked attention of the tree tokens over their own keys; returns ``(out, lse)``.

    Args:
        q: (B, Hq, T, D) queries of the tree tokens (any strides).
        k, v: (B, Hkv, T, D) the tree tokens' own keys and values; Hq % Hkv == 0.
        tree_mask: bool (T, T) or (B, T, T); True = the query row may attend the key column.
        scale: softmax scale, default ``D ** -0.5``.
        prefix_out, prefix_lse: optional (B, Hq, T, D) output and (B, Hq, T) float32 log-sum-exp
            of the same queries over other keys (the cached prefix); the grouped layout
            (B, Hkv, g, T, D) / (B, Hkv, g, T) is accepted too. When given, the result is the exact
            softmax over those keys and the tree keys together (the LSE merge, fused).
        out: optional (B, Hq, T, D) tensor of q's dtype to write into (any strides).

    Returns:
        out (B, Hq, T, D) in q's dtype and lse (B, Hq, T) float32, natural log. A row that may
        attend nothing gets out = 0 and lse = -inf.
    """
    check_attention_inputs(q, k, v)
    batch, num_q_heads, tree_len, head_dim = q.shape
    num_kv_heads = k.shape[1]
    if k.shape[2] != tree_len:
        raise ValueError(f"k/v must hold the T={tree_len} tree tokens; got length {k.shape[2]}")
    if (prefix_out is None) != (prefix_lse is None):
        raise ValueError("prefix_out and prefix_lse must be given together")
    if not triton_can_run_on(q.device):
        raise RuntimeError(
            f"fused_mask_attn needs Triton on CUDA, or TRITON_INTERPRET=1 for CPU tensors (device {q.device})"
        )
    mask = _batched_mask(tree_mask, batch, tree_len, q.device)
    scale = head_dim**-0.5 if scale is None else float(scale)

    if out is None:
        out = new_output((batch, num_q_heads, tree_len, head_dim), q.dtype, q.device)
    elif out.shape != q.shape or out.dtype != q.dtype:
        raise ValueError(f"out must be {tuple(q.shape)} of {q.dtype}; got {tuple(out.shape)} of {out.dtype}")
    lse = new_output((batch, num_q_heads, tree_len), torch.float32, q.device)
    if out.numel() == 0:
        lse.fill_(float("-inf"))
        return out, lse

    from ._attention_core import LOG2E
    from ._fused_mask_attn_kernel import tree_attention_kernel

    group = num_q_heads // num_kv_heads
    packed_rows = group * tree_len
    block_d = block_d_for(head_dim)
    block_m = block_m_for(packed_rows, _MAX_ROW_TILE)
    block_n, num_warps, num_stages = launch_config(q.dtype, block_d, block_m)

    q5, o5, l4 = (grouped_view(t, num_kv_heads) for t in (q, out, lse))
    has_prefix = prefix_out is not None
    if has_prefix:
        p5 = prefix_out if prefix_out.dim() == 5 else grouped_view(prefix_out, num_kv_heads)
        pl4 = prefix_lse if prefix_lse.dim() == 4 else grouped_view(prefix_lse, num_kv_heads)
        if p5.shape != q5.shape or pl4.shape != l4.shape:
            raise ValueError(
                f"prefix_out/prefix_lse must be shaped like q {tuple(q.shape)} and q.shape[:3] (or grouped "
                f"(B, Hkv, g, T[, D])); got {tuple(prefix_out.shape)}, {tuple(prefix_lse.shape)}"
            )
    else:
        p5, pl4 = o5, l4  # never read

    grid = (cdiv(packed_rows, block_m), batch * num_kv_heads)
    tree_attention_kernel[grid](
        q5, k, v, mask, o5, l4, p5, pl4,
        *q5.stride(), *k.stride(), *v.stride(),
        mask.stride(0) if mask.shape[0] > 1 else 0, mask.stride(1), mask.stride(2),
        *o5.stride(), *l4.stride(), *p5.stride(), *pl4.stride(),
        num_kv_heads, tree_len, packed_rows,
        scale * LOG2E,
        HAS_PREFIX=has_prefix,
        DOT_IN_FP32=dot_in_fp32(q.dtype, q.device),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, HEAD_DIM=head_dim,
        num_warps=num_warps, num_stages=num_stages,
    )
    return out, lse
