"""What a draft folder holds, read without loading tensors (safetensors headers only)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from safetensors import safe_open

RECIPE_FILE = "training_recipe.json"
TRAINING_LOG_FILE = "training_log.json"
TRAINING_DATA_FILE = "training_data.json"  # what each corpus source really gave (training.data mix_report)
TRAINING_SPEED_FILE = "training_speed.json"  # steps, seconds, tokens/s, peak memory (training.trainer SpeedLog)
CARD_FILE = "README.md"
IGNORED_PARTS = {".git", ".cache", "__pycache__"}  # never uploaded (huggingface_hub skips .git, .cache too)


@dataclass(frozen=True)
class TensorInfo:
    dtype: str  # safetensors dtype name: F32, BF16, ...
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count


def folder_files(folder: Path) -> list[Path]:
    """Every file that an upload of `folder` would send, relative to it, sorted."""
    folder = Path(folder)
    return sorted(
        path.relative_to(folder)
        for path in folder.rglob("*")
        if path.is_file() and not IGNORED_PARTS & set(path.relative_to(folder).parts)
    )


def safetensors_files(folder: Path) -> list[Path]:
    return [Path(folder) / name for name in folder_files(folder) if name.suffix == ".safetensors"]


def read_tensor_infos(path: Path) -> dict[str, TensorInfo]:
    """Tensor names, dtypes and shapes from one safetensors header (no tensor data is read)."""
    with safe_open(str(path), framework="pt") as handle:
        infos = {}
        for name in handle.keys():
            sliced = handle.get_slice(name)
            infos[name] = TensorInfo(str(sliced.get_dtype()), tuple(sliced.get_shape()))
        return infos


def draft_tensor_infos(folder: Path) -> dict[str, TensorInfo]:
    """All tensors of every safetensors file in `folder` (sharded drafts included)."""
    infos: dict[str, TensorInfo] = {}
    for path in safetensors_files(folder):
        infos.update(read_tensor_infos(path))
    return infos


def read_json(path: Path):
    """Parsed JSON of `path`, or None when the file does not exist."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
