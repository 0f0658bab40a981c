"""Bytes a target forward must read from memory, for the achieved-bandwidth column.

A decoding or verification forward reads every weight once and the KV cache of every layer
once (at the context it attends to). Their sum over the decoding forwards of a call, divided by
the decoding time, is the achieved bandwidth; the ratio to the measured copy bandwidth says how
close to the memory floor a method runs.
"""

from __future__ import annotations


def weight_bytes(model) -> int:
    """Bytes of the model's parameters (tied embeddings / LM head counted once)."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def kv_bytes_per_token(model) -> int:
    """K and V bytes one token occupies in the cache, over all layers."""
    config = model.config.get_text_config()
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    itemsize = model.get_input_embeddings().weight.element_size()
    return 2 * config.num_hidden_layers * kv_heads * head_dim * itemsize


def decoding_bytes(forwards: list[tuple[int, int]], weights: int, per_token: int) -> int:
    """Bytes read by every forward after the first (the prefill): weights + KV of (cached + new)."""
    return sum(weights + per_token * (cached + new) for cached, new in forwards[1:])
