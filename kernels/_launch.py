"""Host-side helpers shared by the kernel wrappers: grouped views, block sizes, output allocation."""

from __future__ import annotations

import os

import torch

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)

# Tests set this (or the env var) to fill fresh outputs with NaN: a slot the kernel forgot to
# write then fails the comparison instead of passing on leftover memory.
POISON_OUTPUTS = os.environ.get("HF_LONGSPEC_POISON_OUTPUTS", "0") == "1"


def new_output(shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """``torch.empty``, or NaN-filled when output poisoning is on."""
    if POISON_OUTPUTS:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def grouped_view(x: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """(B, Hq, T, ...) -> (B, Hkv, g, T, ...) as a view: query head h = kv_head * g + head_in_group."""
    return x.unflatten(1, (num_kv_heads, x.shape[1] // num_kv_heads))


def check_attention_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Shapes, dtypes and devices that every kernel here requires."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError(f"q, k, v must be 4-D (B, H, L, D); got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape; got {tuple(k.shape)} and {tuple(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
        raise ValueError(f"batch and head dim of q {tuple(q.shape)} and k {tuple(k.shape)} must match")
    if q.shape[1] % k.shape[1] != 0:
        raise ValueError(f"query heads ({q.shape[1]}) must be a multiple of KV heads ({k.shape[1]})")
    if q.dtype not in SUPPORTED_DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError(f"q, k, v must share one dtype of {SUPPORTED_DTYPES}; got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError("q, k, v must be on one device")
    if q.shape[3] > 256:
        raise ValueError(f"head dim {q.shape[3]} > 256 is not supported")


def dot_in_fp32(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether kernels multiply in float32 IEEE: fp32 inputs (no TF32 loss), and bf16 on the CPU
    interpreter (its ``tl.dot`` sees bf16 as raw uint16 bits)."""
    return dtype == torch.float32 or (dtype == torch.bfloat16 and torch.device(device).type == "cpu")


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def block_d_for(head_dim: int) -> int:
    """Head-dim tile: a power of two >= 16 (tl.dot's minimum); extra lanes are masked."""
    return max(16, next_power_of_two(head_dim))


def block_m_for(rows: int, cap: int) -> int:
    """Smallest power-of-two row tile (>= 16) that holds ``rows``, at most ``cap``."""
    return min(cap, max(16, next_power_of_two(rows)))


def launch_config(dtype: torch.dtype, block_d: int, block_m: int) -> tuple[int, int, int]:
    """(BLOCK_N, num_warps, num_stages) that keep the tiles in shared memory and registers."""
    wide = dtype == torch.float32 or block_d > 128
    block_n = 32 if wide else 64
    num_warps = 8 if block_m >= 128 or (wide and block_m >= 64) else 4
    num_stages = 2 if wide else 3
    return block_n, num_warps, num_stages
