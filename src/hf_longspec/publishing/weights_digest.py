"""A short name for a draft's weights, recorded beside every measurement of it and on its card.

Why: measurements outlive the weights they were made on. A draft folder trained again after its card
was rendered, or a tau JSON paired with a draft other than the one it measured, would make a card say
what other weights did. Measurement scripts record this digest (tau_curve.py, decode_bench.py,
`hf-longspec bench`), the card shows it, and rendering and the publish checks refuse a mismatch.

The digest covers names, shapes and values rounded to bfloat16, so a float32 draft, its bf16 export and
either one loaded in any dtype share one name: they are the same draft as the GPU decodes it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

import torch
from safetensors.torch import load_file

from .draft_files import safetensors_files

DIGEST_PREFIX = "bf16-sha256:"


def weights_digest(tensors: Mapping[str, torch.Tensor]) -> str:
    """`DIGEST_PREFIX` + 16 hex digits over the sorted names, shapes and bf16-rounded values."""
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].detach().to("cpu", torch.bfloat16).contiguous()
        digest.update(f"{name}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.view(torch.int16).numpy().tobytes())
    return DIGEST_PREFIX + digest.hexdigest()[:16]


def model_weights_digest(model: torch.nn.Module) -> str:
    """The digest of a loaded draft (its own weights: the target's embeddings and LM head are not in it)."""
    return weights_digest(model.state_dict())


def folder_weights_digest(folder: str | Path) -> str:
    """The digest of the weights a draft folder holds (every safetensors file, sharded drafts included)."""
    files = safetensors_files(Path(folder))
    if not files:
        raise FileNotFoundError(f"{folder} holds no .safetensors weights")
    tensors: dict[str, torch.Tensor] = {}
    for path in files:
        tensors.update(load_file(str(path)))
    return weights_digest(tensors)
