"""Triton kernels of hf-longspec, importable as ``hf_longspec.kernels``.

Importing this package never imports Triton: the kernel bodies load on first use, so the
package also imports on machines without Triton, and ``TRITON_INTERPRET`` may be set late.
"""

import sys as _sys


def _installed_kernels_package():
    """The Hugging Face `kernels` package, when this folder was imported under that top-level name.

    Started in a checkout's root (`python -m pytest`, `python -c`), Python finds this folder as `kernels`
    and shadows the Hugging Face package that transformers >= 5.25 imports when it loads (a fresh CI
    install on 2026-12-03 failed to import every test). That package is imported instead, from the path
    without the checkout; where it is not installed this folder stays what `kernels` names, as before.
    The project itself only imports this folder as `hf_longspec.kernels`."""
    import importlib
    import os

    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ours, saved_path = _sys.modules.pop(__name__), _sys.path[:]
    _sys.path[:] = [entry for entry in _sys.path if os.path.abspath(entry or os.curdir) != checkout]
    try:
        return importlib.import_module(__name__)
    except ImportError:
        _sys.modules[__name__] = ours
        return None
    finally:
        _sys.path[:] = saved_path


if __name__ == "kernels" and (_hugging_face_kernels := _installed_kernels_package()) is not None:
    _sys.modules[__name__] = _hugging_face_kernels  # what `import kernels` returns
else:
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
