"""Unmasked attention of the tree queries over the cached prefix, returning the log-sum-exp.

The prefix needs no mask (every tree token sees the whole context), so any fast attention
kernel that also returns its LSE will do. Backends, by name:

- ``flash_attn``: the flash-attn package (``flash_attn_func(..., return_attn_probs=True)``).
- ``torch_flash``: PyTorch's built-in FlashAttention-2,
  ``torch.ops.aten._scaled_dot_product_flash_attention`` (CUDA, fp16/bf16).
- ``triton_splitkv``: our split-KV Triton kernel (:func:`hf_longspec.kernels.prefix_attn_splitkv`).
- ``math``: PyTorch float32 math (CPU and anything else).

All of them fold the GQA group into the query rows, so each KV head is read once and never
copied. ``auto`` picks, per (device type, dtype), the first available of
``AUTO_ORDER_CUDA`` on CUDA and ``math`` elsewhere. Override with ``set_prefix_backend(name)``
or the environment variable ``HF_LONGSPEC_PREFIX_BACKEND``.
"""

from __future__ import annotations

import importlib.util
import os

import torch

from hf_longspec.kernels import prefix_attn_splitkv, triton_can_run_on

from .math_attention import grouped_attention_math

BACKEND_ENV_VAR = "HF_LONGSPEC_PREFIX_BACKEND"
PREFIX_BACKENDS = ("flash_attn", "torch_flash", "triton_splitkv", "math")
# Preference on CUDA when "auto". torch_flash is the measured baseline on the H200; move
# "triton_splitkv" first when benchmarks/attention_bench.py shows it faster on the target GPU.
AUTO_ORDER_CUDA = ("flash_attn", "torch_flash", "triton_splitkv", "math")

_FLASH_DTYPES = (torch.float16, torch.bfloat16)
_requested_backend: str | None = None
_chosen_backends: dict[tuple[str, torch.dtype], str] = {}


def set_prefix_backend(name: str | None) -> None:
    """Force a backend ("auto", a name of PREFIX_BACKENDS) or ``None`` to follow the env var again."""
    global _requested_backend
    if name is not None and name != "auto" and name not in PREFIX_BACKENDS:
        raise ValueError(f"unknown prefix backend {name!r}; choose auto or one of {PREFIX_BACKENDS}")
    _requested_backend = name
    _chosen_backends.clear()


def requested_prefix_backend() -> str:
    """What the user asked for: ``set_prefix_backend`` first, then the env var, else "auto"."""
    name = _requested_backend or os.environ.get(BACKEND_ENV_VAR, "auto") or "auto"
    if name != "auto" and name not in PREFIX_BACKENDS:
        raise ValueError(f"{BACKEND_ENV_VAR}={name!r}; choose auto or one of {PREFIX_BACKENDS}")
    return name


def prefix_backend_available(name: str, device: torch.device | str, dtype: torch.dtype) -> bool:
    """Whether backend ``name`` can run for tensors of this device and dtype."""
    device = torch.device(device)
    if name == "flash_attn":
        return device.type == "cuda" and dtype in _FLASH_DTYPES and importlib.util.find_spec("flash_attn") is not None
    if name == "torch_flash":
        return (device.type == "cuda" and dtype in _FLASH_DTYPES
                and hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention"))
    if name == "triton_splitkv":
        return triton_can_run_on(device)
    return name == "math"


def prefix_backend_name(device: torch.device | str, dtype: torch.dtype) -> str:
    """The backend that :func:`prefix_attention` uses for tensors of this device type and dtype."""
    device = torch.device(device)
    key = (device.type, dtype)
    if key not in _chosen_backends:
        requested = requested_prefix_backend()
        if requested != "auto":
            if not prefix_backend_available(requested, device, dtype):
                raise RuntimeError(f"prefix backend {requested!r} is not available for {device.type}/{dtype}")
            _chosen_backends[key] = requested
        else:
            order = AUTO_ORDER_CUDA if device.type == "cuda" else ("math",)
            _chosen_backends[key] = next(name for name in order if prefix_backend_available(name, device, dtype))
    return _chosen_backends[key]


def _flash_kernels_fit(head_dim: int) -> bool:
    return head_dim % 8 == 0 and head_dim <= 256


def _pack_rows(q: torch.Tensor, num_kv_heads: int) -> torch.Tensor:
    """(B, Hq, T, D) -> (B, Hkv, g*T, D) with a contiguous last dim (copies unless q allows a view)."""
    batch, num_q_heads, query_len, head_dim = q.shape
    rows = q.reshape(batch, num_kv_heads, (num_q_heads // num_kv_heads) * query_len, head_dim)
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def _last_dim_contiguous(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(-1) == 1 else x.contiguous()


def _flash_on_packed_rows(q, k, v, attend):
    """A torch flash kernel over each KV head's packed query rows (B, Hkv, g*T, D): ``attend(rows, keys,
    values)`` returns its (out, lse), unpacked here to the grouped layout (lse cut to the rows: CUDA pads it)."""
    num_kv_heads = k.shape[1]
    group, query_len = q.shape[1] // num_kv_heads, q.shape[2]
    out, lse = attend(_pack_rows(q, num_kv_heads), _last_dim_contiguous(k), _last_dim_contiguous(v))
    return out.unflatten(2, (group, query_len)), lse[..., : group * query_len].unflatten(2, (group, query_len))


def _prefix_torch_flash(q, k, v, scale):
    return _flash_on_packed_rows(q, k, v, lambda rows, keys, values: torch.ops.aten._scaled_dot_product_flash_attention(
        rows, keys, values, 0.0, False, False, scale=scale)[:2])


def _prefix_flash_attn(q, k, v, scale):
    from flash_attn import flash_attn_func

    batch, num_q_heads, query_len, head_dim = q.shape
    num_kv_heads = k.shape[1]
    group = num_q_heads // num_kv_heads
    # flash-attn wants (B, L, H, D): rows = (head_in_group, token), heads = KV heads.
    rows = q.unflatten(1, (num_kv_heads, group)).permute(0, 2, 3, 1, 4).reshape(
        batch, group * query_len, num_kv_heads, head_dim)
    out, lse, _ = flash_attn_func(
        rows, _last_dim_contiguous(k).transpose(1, 2), _last_dim_contiguous(v).transpose(1, 2),
        dropout_p=0.0, softmax_scale=scale, causal=False, return_attn_probs=True,
    )
    out5 = out.view(batch, group, query_len, num_kv_heads, head_dim).permute(0, 3, 1, 2, 4)
    return out5, lse[..., : group * query_len].unflatten(2, (group, query_len))


def _prefix_triton_splitkv(q, k, v, scale):
    # float32 output: the split merge already happens in float32, so the tree merge sees no rounding.
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    out, lse = prefix_attn_splitkv(q, k, v, scale, out=out)
    num_kv_heads = k.shape[1]
    return out.unflatten(1, (num_kv_heads, -1)), lse.unflatten(1, (num_kv_heads, -1))


_BACKEND_FUNCTIONS = {
    "flash_attn": _prefix_flash_attn,
    "torch_flash": _prefix_torch_flash,
    "triton_splitkv": _prefix_triton_splitkv,
    "math": lambda q, k, v, scale: grouped_attention_math(q, k, v, scale),
}


def grouped_prefix_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Like :func:`prefix_attention`, in the grouped layout out (B, Hkv, g, T, D), lse (B, Hkv, g, T).

    Skips the copy that flattening (Hkv, g) back into Hq costs for some backends; the Triton tree
    kernel reads this layout directly.
    """
    batch, num_q_heads, query_len, head_dim = q.shape
    num_kv_heads, key_len = k.shape[1], k.shape[2]
    if key_len == 0:
        group = num_q_heads // num_kv_heads
        out = torch.zeros(batch, num_kv_heads, group, query_len, head_dim, dtype=q.dtype, device=q.device)
        lse = torch.full((batch, num_kv_heads, group, query_len), float("-inf"), device=q.device)
        return out, lse
    backend = prefix_backend_name(q.device, q.dtype)
    if backend in ("flash_attn", "torch_flash") and not _flash_kernels_fit(head_dim):
        backend = "triton_splitkv" if triton_can_run_on(q.device) else "math"
    return _BACKEND_FUNCTIONS[backend](q, k, v, scale)


def prefix_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of every query row over every key, with its log-sum-exp.

    Args:
        q: (B, Hq, T, D) queries; k, v: (B, Hkv, S, D) keys/values, Hq % Hkv == 0.
        scale: softmax scale (usually ``D ** -0.5``).

    Returns:
        out (B, Hq, T, D) in q's dtype, lse (B, Hq, T) float32 (natural log; -inf when S == 0).
    """
    out, lse = grouped_prefix_attention(q, k, v, scale)
    return out.flatten(1, 2).to(q.dtype), lse.flatten(1, 2).float()


def _splitkv_over_lengths(q, k, v, lengths, scale, window=None) -> tuple[torch.Tensor, torch.Tensor]:
    """The split-KV kernel over each row's first ``lengths[b]`` keys (``window``: its anchors and newest
    ones only), read from device memory: graph-safe. Grouped layout, float32."""
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    out, lse = prefix_attn_splitkv(q, k, v, scale, out=out, seqlens=lengths, window=window)
    num_kv_heads = k.shape[1]
    return out.unflatten(1, (num_kv_heads, -1)), lse.unflatten(1, (num_kv_heads, -1))


def _on_cuda_kernels(q: torch.Tensor) -> bool:
    return triton_can_run_on(q.device) and q.device.type == "cuda"


@torch.library.custom_op("hf_longspec::grouped_prefix_attention_varlen", mutates_args=())
def grouped_prefix_attention_varlen(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over the first ``lengths[b]`` keys of a preallocated cache, in the grouped layout.

    q: (B, Hq, T, D); k/v: (B, Hkv, C, D) buffers of capacity C; lengths: (B,) integer device tensor.
    Returns out (B, Hkv, g, T, D) float32 and lse (B, Hkv, g, T) float32. Nothing here reads the
    lengths on the host on CUDA, so it runs inside a captured CUDA graph: the split-KV Triton kernel
    reads them from memory. Elsewhere (no graphs) the float32 math fallback attends the filled part.
    A ``torch.library`` custom op, so ``torch.compile`` traces it as one opaque node.
    """
    if _on_cuda_kernels(q):
        return _splitkv_over_lengths(q, k, v, lengths, scale)
    # No graphs here: read the lengths on the host and attend only the filled part of the buffers
    longest = int(lengths.max())
    k, v = k[:, :, :longest], v[:, :, :longest]
    if bool((lengths == longest).all()):
        return _whole_prefix_off_cuda(q, k, v, scale)
    valid = torch.arange(longest, device=k.device)[None, :] < lengths[:, None]  # (B, longest)
    return grouped_attention_math(q, k, v, scale, allowed=valid[:, None, :].expand(-1, q.shape[2], -1))


def _whole_prefix_off_cuda(q, k, v, scale) -> tuple[torch.Tensor, torch.Tensor]:
    """Every key of k/v, grouped layout, float32. On a CPU torch's fused flash kernel, which returns the
    log-sum-exp too: 1.7-4.6x the math's speed for a 21-row tree over 2k-8k keys on 2 cores
    (benchmarks/cpu_prefix_attention.py; docs/benchmarks.md, "The CPU's own round"); the math on other
    devices, or for head dims it does not take."""
    if q.device.type != "cpu" or k.shape[2] == 0 or not _flash_kernels_fit(q.shape[-1]):
        return grouped_attention_math(q, k, v, scale)
    return _flash_on_packed_rows(q.float(), k.float(), v.float(), lambda rows, keys, values: (
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(rows, keys, values, 0.0, False, scale=scale)[:2]))


@torch.library.custom_op("hf_longspec::grouped_prefix_attention_window", mutates_args=())
def grouped_prefix_attention_window(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float, anchors: int, newest: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """`grouped_prefix_attention_varlen` over only the first `anchors` and the newest `newest` of each row's
    first ``lengths[b]`` keys (a draft's config.cross_attention_window). On CUDA the split-KV kernel reads
    just those keys in place (constant work in the length, graph-safe); elsewhere float32 math over the
    filled part under the window's mask."""
    if _on_cuda_kernels(q):
        return _splitkv_over_lengths(q, k, v, lengths, scale, window=(anchors, newest))
    longest = int(lengths.max())
    index = torch.arange(longest, device=k.device)[None, :]
    filled = lengths.to(k.device)[:, None]
    visible = (index < filled) & ((index < anchors) | (index >= filled - newest))  # (B, longest)
    return grouped_attention_math(q, k[:, :, :longest], v[:, :, :longest], scale,
                                  allowed=visible[:, None, :].expand(-1, q.shape[2], -1))


@grouped_prefix_attention_varlen.register_fake
def _(q, k, v, lengths, scale):
    return _grouped_outputs_like(q, k)


@grouped_prefix_attention_window.register_fake
def _(q, k, v, lengths, scale, anchors, newest):
    return _grouped_outputs_like(q, k)


def _grouped_outputs_like(q: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Empty (out, lse) of the grouped layout, for the custom ops' fake (shape-only) versions."""
    batch, num_q_heads, query_len, head_dim = q.shape
    num_kv_heads = k.shape[1]
    group = num_q_heads // num_kv_heads
    out = q.new_empty(batch, num_kv_heads, group, query_len, head_dim, dtype=torch.float32)
    return out, q.new_empty(batch, num_kv_heads, group, query_len, dtype=torch.float32)
