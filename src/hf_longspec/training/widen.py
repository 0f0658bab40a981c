"""Grow a trained draft's MLP without changing what it computes, so a fine-tune adds capacity to it.

The new hidden units get random input rows (gate and up, at the config's initializer_range) and zero
output columns (down): they add nothing until training moves those columns, so the widened draft
starts exactly where the trained one stands (the zero-initialised half of a LoRA pair, the same way).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import TrainingRecipeError
from ..modeling_longspec import LongSpecDraftModel


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
