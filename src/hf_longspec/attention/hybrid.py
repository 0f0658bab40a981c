"""Hybrid Tree Attention as a transformers attention function (``attn_implementation="longspec_hybrid"``).

During tree verification the T new tokens attend (a) the whole cached prefix, with no mask,
and (b) each other under the ancestor-or-self tree mask. A 4D mask over prefix + tree would be
(T, S + T) per batch and forces slow kernels; instead the prefix goes through a fast unmasked
kernel that returns its log-sum-exp, the tree through ``fused_mask_attn``, and the two are merged
exactly by LSE (fused into the tree kernel on the Triton path).

With a preallocated cache (``generation/tree_cache.py``) the tree's K/V sit inside a buffer of
fixed capacity, right after each row's prefix: the forward then also passes
``longspec_prefix_lengths`` (B,) as a device tensor, and nothing here reads it on the host,
so the whole verification forward can be captured once as a CUDA graph and replayed at every
prefix length.

Calls without a ``longspec_tree_mask`` kwarg (prefill, plain decoding, padding masks) go to the
attention the user had chosen, unchanged: ``longspec_hybrid`` hands them to transformers' SDPA,
``longspec_hybrid_eager`` to the model's own eager attention. Binding a draft selects one of the
two once (model-wide state is never switched per call, so concurrent generate() calls are safe).
The names avoid "flash" (transformers would switch on its flash-attention handling and
packed-sequence detection from position ids, which tree positions break) and "sdpa" (extra checks).
"""

from __future__ import annotations

import torch

import sys

from hf_longspec.kernels import cached_tree_attn

from .prefix import grouped_prefix_attention, grouped_prefix_attention_varlen
from .tree import tree_attention, tree_uses_triton

LONGSPEC_ATTENTION = "longspec_hybrid"
LONGSPEC_ATTENTION_EAGER = "longspec_hybrid_eager"
TREE_MASK_KWARG = "longspec_tree_mask"
PREFIX_LENGTHS_KWARG = "longspec_prefix_lengths"
# attention implementation a bound target had -> the name that keeps it for non-tree calls
HYBRID_NAME_FOR = {"eager": LONGSPEC_ATTENTION_EAGER}


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


@torch.library.custom_op("hf_longspec::cached_tree_attention", mutates_args=())
def cached_tree_attention(
    query: torch.Tensor,
    key_buffer: torch.Tensor,
    value_buffer: torch.Tensor,
    tree_mask: torch.Tensor,
    prefix_lengths: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Hybrid tree attention over a preallocated cache; returns (B, T, Hq, D), contiguous.

    key_buffer/value_buffer: (B, Hkv, C, D) with the committed prefix in [0, prefix_lengths[b])
    and the tree's own K/V already written right after it, in [prefix_lengths[b], + T).
    tree_mask: bool (B, T, T). With the Triton tree backend (CUDA) one split-KV launch attends
    prefix and tree (the tree as one more split, under its mask) and a second merges them by LSE;
    nothing is gathered or read on the host. Elsewhere float32 math. A ``torch.library`` custom op:
    ``torch.compile`` sees one opaque node (shapes from the fake below).
    """
    batch, num_q_heads, tree_len, head_dim = query.shape
    # Written in (B, T, Hq, D) memory order: the layout the model's o_proj wants, without a copy.
    out = torch.empty(batch, tree_len, num_q_heads, head_dim, dtype=query.dtype, device=query.device)
    if tree_uses_triton(query.device):
        cached_tree_attn(query, key_buffer, value_buffer, tree_mask, prefix_lengths, scale,
                         out=out.transpose(1, 2))
        return out
    prefix_out, prefix_lse = grouped_prefix_attention_varlen(query, key_buffer, value_buffer, prefix_lengths, scale)
    positions = prefix_lengths[:, None] + torch.arange(tree_len, device=query.device)[None]
    index = positions[:, None, :, None].expand(batch, key_buffer.shape[1], tree_len, head_dim)
    tree_keys, tree_values = key_buffer.gather(2, index), value_buffer.gather(2, index)
    tree_attention(
        query, tree_keys, tree_values, tree_mask, scale,
        prefix_out=prefix_out, prefix_lse=prefix_lse, out=out.transpose(1, 2),
    )
    return out


@cached_tree_attention.register_fake
def _(query, key_buffer, value_buffer, tree_mask, prefix_lengths, scale):
    batch, num_q_heads, tree_len, head_dim = query.shape
    return query.new_empty(batch, tree_len, num_q_heads, head_dim)


def _root_alone_attention(query, key_buffer, value_buffer, prefix_lengths, scale) -> torch.Tensor:
    """A tree of the root alone (a plain step, never captured): it attends its row's prefix and itself, and no
    mask hides any of them, so one SDPA call over the filled part does what prefix, tree and merge do. On a
    2-core CPU at 8k that is 0.59 against 0.92 ms a layer, and a plain step 80 against 91 ms (a vanilla step: 81)."""
    filled = prefix_lengths + 1
    longest = int(filled.max())
    keys, values = key_buffer[:, :, :longest], value_buffer[:, :, :longest]
    mask = None
    if not bool((filled == longest).all()):  # rows of a batch at other lengths: each reads its own
        mask = (torch.arange(longest, device=query.device)[None] < filled[:, None])[:, None, None, :]
    batch, num_q_heads, _, head_dim = query.shape
    # the query heads of a KV head as rows of one query block (as transformers' SDPA path does): no repeated KV
    rows = query.reshape(batch, keys.shape[1], num_q_heads // keys.shape[1], head_dim)
    out = torch.nn.functional.scaled_dot_product_attention(rows, keys, values, attn_mask=mask, scale=scale)
    return out.reshape(batch, 1, num_q_heads, head_dim)


def _non_tree_attention(module, name: str):
    """The attention a bound target had before binding: SDPA, or the model's own eager function."""
    if name == LONGSPEC_ATTENTION_EAGER:
        eager = getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", None)
        if eager is not None:
            return eager
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward


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
    prefix_lengths = kwargs.pop(PREFIX_LENGTHS_KWARG, None)
    if tree_mask is None:
        name = getattr(getattr(module, "config", None), "_attn_implementation", LONGSPEC_ATTENTION)
        fallback = _non_tree_attention(module, name)
        return fallback(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    if dropout:
        raise ValueError("hybrid tree attention is for inference: dropout must be 0 (call model.eval())")
    for unsupported in ("sliding_window", "softcap", "s_aux"):
        if kwargs.get(unsupported) is not None:
            raise NotImplementedError(f"hybrid tree attention does not support {unsupported}")
    if scaling is None:
        scaling = getattr(module, "scaling", None) or query.shape[-1] ** -0.5
    if prefix_lengths is not None:
        if tree_mask.shape[-1] == 1 and not tree_uses_triton(query.device):  # a plain step: one SDPA call
            return _root_alone_attention(query, key, value, prefix_lengths, scaling), None
        return cached_tree_attention(query, key, value, tree_mask, prefix_lengths, scaling), None
    return hybrid_tree_attention(query, key, value, tree_mask, scaling), None


def register_longspec_attention() -> str:
    """Register ``longspec_hybrid`` and ``longspec_hybrid_eager`` with transformers (idempotent).

    The attention function goes to ``AttentionInterface``; transformers' ``sdpa_mask`` (or
    ``eager_mask``) is registered under the same name in ``AttentionMaskInterface`` so that
    non-tree calls get causal/padding masks exactly as with the implementation they stand for.
    Returns the SDPA-backed name.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

    AttentionInterface.register(LONGSPEC_ATTENTION, longspec_attention_forward)
    AttentionMaskInterface.register(LONGSPEC_ATTENTION, sdpa_mask)
    AttentionInterface.register(LONGSPEC_ATTENTION_EAGER, longspec_attention_forward)
    AttentionMaskInterface.register(LONGSPEC_ATTENTION_EAGER, eager_mask)
    return LONGSPEC_ATTENTION


def use_hybrid_attention(target) -> None:
    """Make the target's attention hybrid-capable, keeping its own implementation for non-tree calls.

    Done once when a draft is bound (and again only if the user changes the implementation later)."""
    current = target.config._attn_implementation
    if current not in (LONGSPEC_ATTENTION, LONGSPEC_ATTENTION_EAGER):
        register_longspec_attention()
        target.set_attn_implementation(hybrid_name_for(current))


def hybrid_name_for(attn_implementation: str | None) -> str:
    """The hybrid name that keeps ``attn_implementation`` for a bound target's non-tree calls."""
    if attn_implementation in (LONGSPEC_ATTENTION, LONGSPEC_ATTENTION_EAGER):
        return attn_implementation
    return HYBRID_NAME_FOR.get(attn_implementation, LONGSPEC_ATTENTION)
