"""Keeping the accepted tree path in every target cache layer, by gathering (no recomputation)."""

from __future__ import annotations

import torch

from .errors import UnsupportedTargetError


def check_commitable_cache(cache) -> None:
    """LongSpec rewrites cache layers in place: only plain full-attention dynamic layers allow that."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if layers is None:
        raise UnsupportedTargetError(
            f"LongSpec needs a transformers DynamicCache; got {type(cache).__name__} "
            "(leave cache_implementation unset, or pass DynamicCache(config=model.config))."
        )
    for index, layer in enumerate(layers):
        if not isinstance(layer, DynamicLayer) or getattr(layer, "is_sliding", False):
            raise UnsupportedTargetError(
                f"Cache layer {index} is a {type(layer).__name__}; LongSpec supports full-attention DynamicLayer only."
            )


def commit_tree_path(cache, prefix_length: int, accepted_nodes: list[int]) -> None:
    """After verifying a tree appended at `prefix_length`, keep only `accepted_nodes` (tree ids,
    root first) right after the prefix, in every layer. A chain 0,1,..,a needs no copy at all."""
    keep = prefix_length + len(accepted_nodes)
    is_prefix_chain = accepted_nodes == list(range(len(accepted_nodes)))
    source = None
    for layer in cache.layers:
        if not getattr(layer, "is_initialized", True) or layer.keys is None or layer.keys.numel() == 0:
            continue
        if not is_prefix_chain:
            if source is None or source.device != layer.keys.device:
                source = torch.tensor(accepted_nodes, device=layer.keys.device) + prefix_length
            layer.keys[:, :, prefix_length:keep] = layer.keys.index_select(2, source)
            layer.values[:, :, prefix_length:keep] = layer.values.index_select(2, source)
        layer.keys = layer.keys[:, :, :keep]
        layer.values = layer.values[:, :, :keep]


def crop_cache(cache, length: int) -> None:
    """Drop cache entries past `length` (e.g. after stopping inside an accepted path)."""
    for layer in cache.layers:
        if getattr(layer, "keys", None) is not None and layer.keys.dim() == 4 and layer.keys.shape[2] > length:
            layer.keys = layer.keys[:, :, :length]
            layer.values = layer.values[:, :, :length]
