"""Grow a trained draft without changing what it computes, so a fine-tune adds capacity to it: a wider
MLP (`widen_mlp`), the cross-attention's learned log-length temperature (`add_length_scaling`), or its
direct read of the newest target entry (`add_entry_input`).

The new hidden units get random input rows (gate and up, at the config's initializer_range) and zero
output columns (down): they add nothing until training moves those columns, so the widened draft
starts exactly where the trained one stands (the zero-initialised half of a LoRA pair, the same way).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import TrainingRecipeError
from ..modeling_longspec import LongSpecDraftModel, ZeroStartLinear


def widen_mlp(draft: LongSpecDraftModel, intermediate_size: int, seed: int = 0) -> LongSpecDraftModel:
    """`draft` with its MLP grown to `intermediate_size` hidden units, in place (also returned)."""
    mlp = draft.mlp
    width = mlp.gate_proj.out_features
    if intermediate_size < width:
        raise TrainingRecipeError(f"intermediate_size={intermediate_size} is narrower than the draft's MLP ({width}); "
                         "allowed: its width or more (widening keeps what the draft computes, narrowing would not)")
    if intermediate_size == width:
        return draft
    extra = intermediate_size - width
    generator = torch.Generator().manual_seed(seed)
    std = draft.config.initializer_range

    def grown(old: nn.Linear, rows: int, cols: int, new_part: torch.Tensor, along: int) -> nn.Linear:
        layer = nn.Linear(cols, rows, bias=old.bias is not None, device=old.weight.device, dtype=old.weight.dtype)
        with torch.no_grad():
            layer.weight.copy_(torch.cat([old.weight, new_part.to(old.weight)], dim=along))
            if old.bias is not None:  # gate/up biases grow (zero for the new units); down's bias stays
                layer.bias.copy_(old.bias if along == 1 else torch.cat([old.bias, old.bias.new_zeros(extra)]))
        return layer

    hidden = mlp.gate_proj.in_features
    mlp.gate_proj = grown(mlp.gate_proj, intermediate_size, hidden, torch.randn(extra, hidden, generator=generator) * std, 0)
    mlp.up_proj = grown(mlp.up_proj, intermediate_size, hidden, torch.randn(extra, hidden, generator=generator) * std, 0)
    mlp.down_proj = grown(mlp.down_proj, hidden, intermediate_size, torch.zeros(hidden, extra), 1)
    draft.config.intermediate_size = intermediate_size
    return draft


def add_length_scaling(draft: LongSpecDraftModel, length_scale: int) -> LongSpecDraftModel:
    """`draft` with `cross_attention_length_scale = length_scale` (configuration_longspec.py), in place:
    its per-head gains start at zero, where the scaling is 1 at every length, so it computes the same."""
    if draft.config.cross_attention_length_scale is not None:
        if draft.config.cross_attention_length_scale != length_scale:
            raise TrainingRecipeError(
                f"cross_attention_length_scale={length_scale} asked of a draft trained with "
                f"{draft.config.cross_attention_length_scale}; allowed: its own value (the gains it learned "
                "belong to that n0)")
        return draft
    draft.config.cross_attention_length_scale = length_scale
    try:
        draft.config._validate_longspec_fields()
    except ValueError as error:  # refused by name, the draft left as it was
        draft.config.cross_attention_length_scale = None
        raise TrainingRecipeError(str(error)) from None
    attention = draft.cross_attn
    attention.length_scale = length_scale
    weight = attention.q_proj.weight
    attention.length_gain = nn.Parameter(torch.zeros(attention.num_heads, device=weight.device, dtype=weight.dtype))
    return draft


def add_entry_input(draft: LongSpecDraftModel) -> LongSpecDraftModel:
    """`draft` with `target_entry_input = True` (configuration_longspec.py), in place: the projection of
    the newest target entry starts at zero, so it computes the same until training moves it."""
    if draft.config.target_entry_input:
        return draft
    attention = draft.cross_attn
    weight = attention.q_proj.weight
    attention.entry_proj = ZeroStartLinear(2 * attention.num_kv_heads * attention.head_dim, weight.shape[1],
                                           bias=False, device=weight.device, dtype=weight.dtype)  # zero
    draft.config.target_entry_input = True
    return draft
