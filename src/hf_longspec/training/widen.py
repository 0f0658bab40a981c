"""Grow a trained draft without changing what it computes, so a fine-tune adds capacity to it: a wider
MLP (`widen_mlp`), the cross-attention's learned log-length temperature (`add_length_scaling`), its
direct read of the newest target entry (`add_entry_input`), or its reads of more target layers
(`add_target_layers`).

The new hidden units (and query heads) get random input rows (gate and up; q_proj), at the config's
initializer_range, and zero output columns (down; o_proj): they add nothing until training moves those
columns, so the widened draft starts exactly where the trained one stands (the zero-initialised half of
a LoRA pair, the same way).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import TrainingRecipeError
from ..modeling_longspec import LongSpecDraftModel, ZeroStartLinear


def _grown(old: nn.Linear, new_part: torch.Tensor, along: int) -> nn.Linear:
    """`old` with `new_part` appended to its weight: along 0, new output rows (their bias entries zero); along
    1, new input columns (the bias, of the outputs, unchanged)."""
    with torch.no_grad():
        weight = torch.cat([old.weight, new_part.to(old.weight)], dim=along)
        layer = nn.Linear(weight.shape[1], weight.shape[0], bias=old.bias is not None,
                          device=weight.device, dtype=weight.dtype)
        layer.weight.copy_(weight)
        if old.bias is not None:
            layer.bias.copy_(old.bias if along == 1 else torch.cat([old.bias, old.bias.new_zeros(new_part.shape[0])]))
    return layer


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
    hidden = mlp.gate_proj.in_features
    mlp.gate_proj = _grown(mlp.gate_proj, torch.randn(extra, hidden, generator=generator) * std, along=0)
    mlp.up_proj = _grown(mlp.up_proj, torch.randn(extra, hidden, generator=generator) * std, along=0)
    mlp.down_proj = _grown(mlp.down_proj, torch.zeros(hidden, extra), along=1)
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


def add_target_layers(draft: LongSpecDraftModel, extra: list[int], seed: int = 0) -> LongSpecDraftModel:
    """`draft` reading target layers `extra` too (`extra_target_layer_indices`, configuration_longspec.py), in
    place: each new layer's block of query heads gets random q_proj rows and zero o_proj columns (and zero
    length gains, where the draft has them), so it computes the same until training moves those columns."""
    if not isinstance(extra, (list, tuple)):
        raise TrainingRecipeError(f"extra_target_layer_indices={extra!r}; allowed: a list of distinct ints (target "
                                  "layers the cross-attention also reads)")
    config, extra = draft.config, list(extra)
    have = list(config.extra_target_layer_indices)
    if have or not extra:
        if [config.resolve_layer(i) for i in have] != [config.resolve_layer(i) for i in extra]:
            raise TrainingRecipeError(f"extra_target_layer_indices={extra} asked of a draft trained with {have}; "
                                      "allowed: its own layers (its query blocks learned those layers' keys)")
        return draft
    config.extra_target_layer_indices = extra
    try:
        config._validate_longspec_fields()
    except ValueError as error:  # refused by name, the draft left as it was
        config.extra_target_layer_indices = have
        raise TrainingRecipeError(str(error)) from None
    attention = draft.cross_attn
    weight = attention.q_proj.weight
    added = weight.shape[0] * len(extra)
    new_rows = torch.randn(added, weight.shape[1], generator=torch.Generator().manual_seed(seed))
    attention.q_proj = _grown(attention.q_proj, new_rows * config.initializer_range, along=0)
    attention.o_proj = _grown(attention.o_proj, torch.zeros(weight.shape[1], added), along=1)
    if attention.length_gain is not None:
        gain = attention.length_gain
        new_gains = gain.new_zeros(attention.heads_per_layer * len(extra))
        attention.length_gain = nn.Parameter(torch.cat([gain.detach(), new_gains]))
    attention.num_layers = 1 + len(extra)
    attention.num_heads = attention.heads_per_layer * attention.num_layers
    return draft

