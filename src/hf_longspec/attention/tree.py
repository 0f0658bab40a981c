"""Masked attention among the tree tokens, optionally merged with a finished prefix result.

Uses the Triton kernel :func:`hf_longspec.kernels.fused_mask_attn` on CUDA, and float32 PyTorch
math on the CPU: the Triton interpreter is a testing tool (kernel tests call the kernel directly),
far too slow to verify trees in a real generation. ``HF_LONGSPEC_TREE_BACKEND=triton`` (read once, at
import) forces the kernel wherever Triton can run (the interpreter included), ``=math`` forces the fallback.
"""

from __future__ import annotations

import os

import torch

from hf_longspec.kernels import fused_mask_attn, triton_can_run_on

from .math_attention import grouped_attention_math
from .merge import merge_attention_states


TREE_BACKEND_ENV_VAR = "HF_LONGSPEC_TREE_BACKEND"


def _requested_tree_backend() -> str:
    requested = os.environ.get(TREE_BACKEND_ENV_VAR, "auto")
    if requested not in ("auto", "triton", "math"):
        raise ValueError(f"{TREE_BACKEND_ENV_VAR}={requested!r}; choose auto, triton or math")
    return requested


# Read once, at import: the attention path reads no environment per call (per layer), which would
# cost every layer a lookup and let another thread change the backend mid-forward.
TREE_BACKEND = _requested_tree_backend()


def tree_uses_triton(device: torch.device | str) -> bool:
    """Whether the tree part runs the Triton kernel on ``device`` (else PyTorch float32 math)."""
    if TREE_BACKEND == "math":
        return False
    if TREE_BACKEND == "auto" and torch.device(device).type != "cuda":
        return False
    return triton_can_run_on(device)


def _as_heads(x: torch.Tensor, num_query_heads_dims: int) -> torch.Tensor:
    """Accept the grouped layout (B, Hkv, g, T[, D]) as well as (B, Hq, T[, D])."""
    return x.flatten(1, 2) if x.dim() == num_query_heads_dims + 1 else x


def tree_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    tree_mask: torch.Tensor,
    scale: float,
    *,
    prefix_out: torch.Tensor | None = None,
    prefix_lse: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of the tree queries q (B, Hq, T, D) over the tree keys k/v (B, Hkv, T, D).

    ``tree_mask``: bool (T, T) or (B, T, T), True = may attend. With ``prefix_out``/``prefix_lse``
    (shaped (B, Hq, T, D)/(B, Hq, T), or grouped (B, Hkv, g, T, D)/(B, Hkv, g, T)) the result covers
    the prefix keys too. Returns out (B, Hq, T, D) in q's dtype and lse (B, Hq, T) float32.
    """
    if tree_uses_triton(q.device):
        return fused_mask_attn(q, k, v, tree_mask, scale, prefix_out=prefix_out, prefix_lse=prefix_lse, out=out)

    tree_out, tree_lse = grouped_attention_math(q, k, v, scale, allowed=tree_mask)
    tree_out, tree_lse = tree_out.flatten(1, 2), tree_lse.flatten(1, 2)
    if prefix_out is not None:
        tree_out, tree_lse = merge_attention_states(
            _as_heads(prefix_out, 4), _as_heads(prefix_lse, 3), tree_out, tree_lse, out_dtype=torch.float32
        )
    if out is None:
        return tree_out.to(q.dtype), tree_lse
    out.copy_(tree_out)
    return out, tree_lse
