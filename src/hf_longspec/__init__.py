"""hf-longspec: lossless long-context tree speculative decoding (LongSpec) for transformers.

    draft = LongSpecDraftModel.from_target(target)          # or load_embedded_draft(target)
    out = target.generate(input_ids, assistant_model=draft)  # tree speculation, exact output
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _serve_checkout_folders() -> None:
    """In a plain checkout (PYTHONPATH=src) serve ./kernels and ./model_cards as subpackages,
    as the installed package does through pyproject's package-dir mapping. The checkout's own folders
    win over an editable install of another tree (a git worktree run with PYTHONPATH=src), whose finder
    would serve that tree's kernels and shipped draft."""
    root = Path(__file__).resolve().parents[2]
    for name in ("kernels", "model_cards"):
        full = f"{__name__}.{name}"
        if full in sys.modules or not (root / name / "__init__.py").exists():
            continue
        if any((Path(p) / name).exists() for p in __path__):
            continue
        spec = importlib.util.spec_from_file_location(
            full, root / name / "__init__.py", submodule_search_locations=[str(root / name)]
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[full] = module
        spec.loader.exec_module(module)
        globals()[name] = module  # hf_longspec.kernels as an attribute too, as an import would bind it


_serve_checkout_folders()

from transformers import AutoConfig, AutoModel  # noqa: E402

from .configuration_longspec import LongSpecDraftConfig  # noqa: E402
from .embedded import load_embedded_draft, load_embedded_target  # noqa: E402
from .errors import (  # noqa: E402
    IncompatibleDraftError,
    LongSpecError,
    UnboundDraftError,
    UnsupportedGenerationError,
    UnsupportedTargetError,
)
from .modeling_longspec import LongSpecDraftModel  # noqa: E402

from .attention import LONGSPEC_ATTENTION, register_longspec_attention  # noqa: E402
from .generation import LongSpecDecoder  # noqa: E402  (registers generate() routing for bound drafts)

AutoConfig.register(LongSpecDraftConfig.model_type, LongSpecDraftConfig, exist_ok=True)
AutoModel.register(LongSpecDraftConfig, LongSpecDraftModel, exist_ok=True)
register_longspec_attention()  # attn_implementation="longspec_hybrid" works after `import hf_longspec`

__version__ = "0.1.0"
__all__ = [
    "LONGSPEC_ATTENTION",
    "LongSpecDraftConfig",
    "LongSpecDraftModel",
    "LongSpecDecoder",
    "load_embedded_target",
    "load_embedded_draft",
    "LongSpecError",
    "IncompatibleDraftError",
    "UnsupportedTargetError",
    "UnboundDraftError",
    "UnsupportedGenerationError",
]
