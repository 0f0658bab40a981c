"""Hybrid Tree Attention as a transformers attention function (``attn_implementation="longspec_hybrid"``).

During tree verification the T new tokens attend (a) the whole cached prefix, with no mask,
and (b) each other under the ancestor-or-self tree mask. A 4D mask over prefix + tree would be
(T, S + T) per batch and forces slow kernels; instead the prefix goes through a fast unmasked
kernel that returns its log-sum-exp, the tree through ``fused_mask_attn``, and the two are merged
exactly by LSE (fused into the tree kernel on the Triton path).

Calls without a ``longspec_tree_mask`` kwarg (prefill, plain decoding, padding masks) are passed
to transformers' own SDPA attention unchanged. The name avoids "flash" (transformers would switch
on its flash-attention handling and packed-sequence detection from position ids, which tree
positions break) and "sdpa" (extra checks).
"""

from __future__ import annotations

import torch

from .prefix import grouped_prefix_attention
from .tree import tree_attention

LONGSPEC_ATTENTION = "longspec_hybrid"
TREE_MASK_KWARG = "longspec_tree_mask"


def hybrid_tree_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    tree_mask: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Attention of the T tree queries over cached prefix + tree; returns (B, T, Hq, D), contiguous.

    query: (B, Hq, T, D); key/value: (B, Hkv, S + T, D), the last T entries being the tree tokens.
    tree_mask: bool (T, T) or (B, T, T), True = may attend (ancestor-or-self). The prefix is
    assumed unpadded: every tree token sees all S cached entries.
    """
    batch, num_q_heads, tree_len, head_dim = query.shape
    prefix_len = key.shape[2] - tree_len
    if prefix_len < 0:
        raise ValueError(f"key holds {key.shape[2]} entries, fewer than the {tree_len} tree queries")
    prefix_out, prefix_lse = grouped_prefix_attention(
        query, key[:, :, :prefix_len], value[:, :, :prefix_len], scale
    )
    # Written in (B, T, Hq, D) memory order: the layout the model's o_proj wants, without a copy.
    out = torch.empty(batch, tree_len, num_q_heads, head_dim, dtype=query.dtype, device=query.device)
    tree_attention(
        query, key[:, :, prefix_len:], value[:, :, prefix_len:], tree_mask, scale,
        prefix_out=prefix_out, prefix_lse=prefix_lse, out=out.transpose(1, 2),
    )
    return out


def longspec_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers attention function: hybrid tree attention when ``longspec_tree_mask`` is given.

    Tree calls ignore ``attention_mask`` (callers pass a tiny 4D placeholder only so transformers
    does not build a (T, S + T) mask). Other calls go to ``sdpa_attention_forward``.
    Returns (attn_output (B, T, Hq, D), None).
    """
    tree_mask = kwargs.pop(TREE_MASK_KWARG, None)
    if tree_mask is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    if dropout:
        raise ValueError("hybrid tree attention is for inference: dropout must be 0 (call model.eval())")
    for unsupported in ("sliding_window", "softcap", "s_aux"):
        if kwargs.get(unsupported) is not None:
            raise NotImplementedError(f"hybrid tree attention does not support {unsupported}")
    if scaling is None:
        scaling = getattr(module, "scaling", None) or query.shape[-1] ** -0.5
    return hybrid_tree_attention(query, key, value, tree_mask, scaling), None


def register_longspec_attention() -> str:
    """Register ``longspec_hybrid`` with transformers (idempotent); returns the name.

    The attention function goes to ``AttentionInterface``; transformers' ``sdpa_mask`` is
    registered under the same name in ``AttentionMaskInterface`` so that non-tree calls still get
    causal/padding masks exactly as with ``attn_implementation="sdpa"``.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(LONGSPEC_ATTENTION, longspec_attention_forward)
    AttentionMaskInterface.register(LONGSPEC_ATTENTION, sdpa_mask)
    return LONGSPEC_ATTENTION
