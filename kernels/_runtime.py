"""Where Triton kernels can run, and how big the device is.

Kept free of a top-level ``import triton`` so that ``hf_longspec.kernels`` imports on machines
without Triton (macOS, CPU-only wheels). Triton reads ``TRITON_INTERPRET`` when a kernel is
decorated, so the kernel modules themselves are imported lazily, after the caller had its chance
to set it.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import torch

# Programs per split-KV launch are sized from this when the device has no SM count (interpreter).
_CPU_PSEUDO_SM_COUNT = 4


@functools.lru_cache(maxsize=None)
def triton_available() -> bool:
    """True when the ``triton`` package can be imported."""
    return importlib.util.find_spec("triton") is not None


def triton_interpreter_enabled() -> bool:
    """True when Triton runs kernels on the CPU through its interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def triton_can_run_on(device: torch.device | str) -> bool:
    """The single place that decides whether our Triton kernels can run on ``device``.

    CUDA devices need the compiler; CPU tensors need the interpreter. Everything else falls back
    to PyTorch code in :mod:`hf_longspec.attention`.
    """
    device = torch.device(device)
    if not triton_available():
        return False
    if device.type == "cuda":
        return not triton_interpreter_enabled()
    if device.type == "cpu":
        return triton_interpreter_enabled()
    return False


@functools.lru_cache(maxsize=None)
def streaming_multiprocessor_count(device: torch.device | str) -> int:
    """Number of SMs to fill with programs; a small stand-in on the CPU interpreter."""
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return torch.cuda.get_device_properties(index).multi_processor_count
    return _CPU_PSEUDO_SM_COUNT
