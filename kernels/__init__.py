"""Triton kernels of hf-longspec, importable as ``hf_longspec.kernels``.

Importing this package never imports Triton: the kernel bodies load on first use, so the
package also imports on machines without Triton, and ``TRITON_INTERPRET`` may be set late.
"""

from ._runtime import triton_available, triton_can_run_on, triton_interpreter_enabled
from .fused_mask_attn import fused_mask_attn
from .prefix_splitkv import SplitPlan, Tiles, cached_tree_attn, choose_num_splits, plan_splits, prefix_attn_splitkv

__all__ = [
    "SplitPlan",
    "Tiles",
    "cached_tree_attn",
    "choose_num_splits",
    "fused_mask_attn",
    "plan_splits",
    "prefix_attn_splitkv",
    "triton_available",
    "triton_can_run_on",
    "triton_interpreter_enabled",
]
