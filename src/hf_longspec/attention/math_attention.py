"""Attention with log-sum-exp in plain PyTorch float32: the CPU fallback of every kernel here.

GQA is handled like in the kernels, by folding the g query heads of a KV group into the row axis
((B, Hq, T, D) -> (B, Hkv, g*T, D)), so keys and values are never repeated.
"""

from __future__ import annotations

import torch


def grouped_attention_math(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float,
    allowed: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 attention of q (B, Hq, T, D) over k/v (B, Hkv, S, D).

    ``allowed``: optional bool (T, S) or (B|1, T, S), True = the query row may attend the key.
    Returns the grouped layout: out (B, Hkv, g, T, D) float32 and lse (B, Hkv, g, T) float32.
    Rows that may attend nothing get out = 0, lse = -inf.
    """
    batch, num_q_heads, query_len, head_dim = q.shape
    num_kv_heads, key_len = k.shape[1], k.shape[2]
    group = num_q_heads // num_kv_heads
    rows = q.float().reshape(batch, num_kv_heads, group * query_len, head_dim)
    scores = torch.matmul(rows, k.float().transpose(-1, -2)) * scale
    if allowed is not None:
        if allowed.dim() == 2:
            allowed = allowed.unsqueeze(0)
        allowed_rows = allowed.to(scores.device, torch.bool).repeat(1, group, 1).unsqueeze(1)
        scores = scores.masked_fill(~allowed_rows, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    seen = lse > float("-inf")
    probs = torch.exp(scores - torch.where(seen, lse, 0.0).unsqueeze(-1))
    out = torch.matmul(probs, v.float()).masked_fill(~seen.unsqueeze(-1), 0.0)
    return (
        out.view(batch, num_kv_heads, group, query_len, head_dim),
        lse.view(batch, num_kv_heads, group, query_len),
    )
