"""Start a new draft from the target's own layer weights instead of random ones (`draft_init="target"`).

The draft is one decoder layer over the token embeddings, shaped like the target's layers, and its
cross-attention reads K/V that target layers cached. Both have a trained counterpart in the target:
- the self-attention and the MLP read token embeddings, as the target's first layer does: they start
  as layer 0's (with its two norms);
- the cross-attention block over target layer L (config.resolved_target_layers, in block order) starts
  with layer L's own q_proj rows and o_proj columns, the projections trained to query exactly those keys
  and values (its norm: the input norm of the first layer read).
The final norm is the target's already (LongSpecDraftModel.from_target). Weights the draft has no place
for are left out (Qwen2's q/k/v biases, Qwen3's q/k norms): on such targets the start is near the layer,
not a copy of it. Measured on SmolLM2 (thirtieth
session, docs/training.md): this start leads for about 200 steps, then trains to a worse draft (-0.22 tau
at 700 steps, both seeds), so "random" stays the default.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import TrainingRecipeError
from ..modeling_longspec import LongSpecDraftModel

DRAFT_INITS = ("random", "target")


def _decoder_layers(target) -> nn.ModuleList:
    layers = getattr(getattr(target, "model", None), "layers", None)
    if layers is None:
        raise TrainingRecipeError(f"draft_init='target' needs the target's decoder layers at target.model.layers; "
                                  f"{type(target).__name__} has none there. Allowed: draft_init='random'.")
    return layers


def _copy(into: torch.Tensor, source: torch.Tensor, name: str) -> None:
    if tuple(into.shape) != tuple(source.shape):
        raise TrainingRecipeError(
            f"draft_init='target': the draft's {name} is {tuple(into.shape)}, the target's {tuple(source.shape)} "
            "(a tensor-parallel shard, or a draft resized by its overrides). Allowed: draft_init='random' for such a draft.")
    into.copy_(source.detach().to(into.dtype))


def _copy_bias(into: torch.Tensor | None, source: torch.Tensor | None, name: str) -> None:
    """A bias the draft has: the target's, or zero where the target has none."""
    if into is not None and source is None:
        into.zero_()
    elif into is not None:
        _copy(into, source, name)


def _copy_linear(into: nn.Linear, source: nn.Linear, name: str) -> None:
    _copy(into.weight, source.weight, f"{name}.weight")
    _copy_bias(into.bias, source.bias, f"{name}.bias")


@torch.no_grad()
def start_from_target(draft: LongSpecDraftModel, target) -> LongSpecDraftModel:
    """`draft` (new, bound to `target`) with the weights the module docstring lists copied in; in place,
    also returned."""
    layers = _decoder_layers(target)
    first = layers[0]
    _copy(draft.input_layernorm.weight, first.input_layernorm.weight, "input_layernorm.weight")
    for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
        _copy_linear(getattr(draft.self_attn, name), getattr(first.self_attn, name), f"self_attn.{name}")
    _copy(draft.post_attention_layernorm.weight, first.post_attention_layernorm.weight, "post_attention_layernorm.weight")
    for name in ("gate_proj", "up_proj", "down_proj"):
        _copy_linear(getattr(draft.mlp, name), getattr(first.mlp, name), f"mlp.{name}")

    cross = draft.cross_attn
    read = draft.target_layers
    _copy(draft.cross_attn_layernorm.weight, layers[read[0]].input_layernorm.weight, "cross_attn_layernorm.weight")
    features = cross.heads_per_layer * cross.head_dim
    for block, layer_index in enumerate(read):
        attention = layers[layer_index].self_attn
        rows = slice(block * features, (block + 1) * features)
        _copy(cross.q_proj.weight[rows], attention.q_proj.weight, f"cross_attn.q_proj rows of layer {layer_index}")
        _copy_bias(None if cross.q_proj.bias is None else cross.q_proj.bias[rows], attention.q_proj.bias,
                   f"cross_attn.q_proj bias of layer {layer_index}")
        _copy(cross.o_proj.weight[:, rows], attention.o_proj.weight, f"cross_attn.o_proj columns of layer {layer_index}")
    return draft
