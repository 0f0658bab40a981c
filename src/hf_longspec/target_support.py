"""What a target must look like for the draft to read it, and the small API differences
between transformers releases (5.17 on the GPU machine, newest on CI)."""

from __future__ import annotations

import inspect
from functools import lru_cache

import torch

from .errors import UnsupportedTargetError

# Decoder-only families whose attention stores post-RoPE K/V per layer in a plain
# (B, H_kv, S, D) cache and accepts position_ids plus a 4D mask. Others are refused.
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def target_rope_parameters(config) -> dict:
    """The target's RoPE parameters as one flat dict (transformers 5.x keeps them in rope_parameters)."""
    params = getattr(config, "rope_parameters", None)
    if params is None:
        theta = getattr(config, "rope_theta", None)
        if theta is None:
            return {}
        params = {"rope_type": "default", "rope_theta": theta}
        if getattr(config, "rope_scaling", None):
            params.update(config.rope_scaling)
    params = dict(params)
    if "rope_type" not in params and "type" in params:
        params["rope_type"] = params.pop("type")
    params.setdefault("rope_type", "default")
    return params


def check_supported_target_config(config) -> None:
    """Raise UnsupportedTargetError unless the draft can read this architecture's KV cache."""
    model_type = getattr(config, "model_type", None)
    if getattr(config, "is_encoder_decoder", False):
        raise UnsupportedTargetError(f"Target '{model_type}' is encoder-decoder; LongSpec needs a decoder-only model.")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise UnsupportedTargetError(
            f"Target architecture '{model_type}' is not supported; supported: {', '.join(SUPPORTED_MODEL_TYPES)}."
        )
    rope = target_rope_parameters(config)
    if "rope_theta" not in rope:
        raise UnsupportedTargetError(
            f"Target '{model_type}' has no RoPE parameters; the draft's cross-attention needs rotary positions."
        )
    if rope["rope_type"] not in SUPPORTED_ROPE_TYPES:
        raise UnsupportedTargetError(
            f"Target RoPE type '{rope['rope_type']}' is not supported; supported: {', '.join(SUPPORTED_ROPE_TYPES)}."
        )
    layer_types = getattr(config, "layer_types", None)
    sliding = (layer_types is not None and any(t != "full_attention" for t in layer_types)) or (
        getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True)
    )
    if sliding:
        raise UnsupportedTargetError(
            f"Target '{model_type}' uses sliding-window layers, whose cache drops old tokens; "
            "LongSpec needs full-attention layers (a cache of every token)."
        )


def check_supported_target(model) -> None:
    """Check a loaded target model: supported config, embeddings and LM head reachable."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    check_supported_target_config(config)
    if model.get_output_embeddings() is None:
        raise UnsupportedTargetError(
            f"{type(model).__name__} has no LM head; pass the *ForCausalLM model, not the bare decoder."
        )


@lru_cache(maxsize=None)
def _forward_parameters(model_class: type) -> frozenset:
    return frozenset(inspect.signature(model_class.forward).parameters)


def cache_argument_name(model) -> str:
    """'cache' in new transformers, 'past_key_values' in 5.17: pass the KV cache under the right name."""
    return "cache" if "cache" in _forward_parameters(type(model)) else "past_key_values"


def cache_from_model_kwargs(model_kwargs: dict):
    """The KV cache generate() prepared, whatever name this transformers release gave it."""
    cache = model_kwargs.get("cache")
    return cache if cache is not None else model_kwargs.get("past_key_values")


def cache_layer(cache, layer_index: int):
    """The cache layer holding one target layer's (B, H_kv, S, D) keys and values."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        raise UnsupportedTargetError(
            f"Cannot read the target's KV cache of type {type(cache).__name__}; use transformers' DynamicCache."
        )
    layer = layers[layer_index]
    if getattr(layer, "is_sliding", False):
        raise UnsupportedTargetError("The target cache layer read by the draft is a sliding-window layer.")
    return layer


def target_layers_kv(cache, layers) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values of the target layers `layers` side by side on the head axis, (B, L * H_kv, S, D), as a
    draft's training forward reads them (`LongSpecDraftModel.target_layers`); one layer: not copied."""
    pairs = [target_layer_kv(cache, layer) for layer in layers]
    if len(pairs) == 1:
        return pairs[0]
    return torch.cat([keys for keys, _ in pairs], dim=1), torch.cat([values for _, values in pairs], dim=1)


def target_layer_kv(cache, layer_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Keys and values (post-RoPE) that the target cached for `layer_index`, without copying."""
    layer = cache_layer(cache, layer_index)
    keys = getattr(layer, "keys", None)
    if keys is None or keys.dim() != 4:
        raise UnsupportedTargetError(
            f"The target cache layer {layer_index} ({type(layer).__name__}) holds no (B, H, S, D) keys yet."
        )
    return keys, layer.values
