"""Is a draft folder fit to publish? Every problem is collected and reported at once."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
from huggingface_hub import ModelCard

from ..configuration_longspec import LongSpecDraftConfig
from ..errors import LongSpecError
from .draft_files import CARD_FILE, TensorInfo, draft_tensor_infos, folder_files
from .weights_digest import DIGEST_PREFIX, folder_weights_digest

# Pickle-based (can run code when loaded) or other formats that a draft must not ship.
FORBIDDEN_WEIGHT_SUFFIXES = (
    ".bin", ".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".joblib", ".npy", ".npz", ".h5", ".msgpack", ".gguf", ".onnx"
)
# Names that only the target's own weights carry: the draft borrows embeddings and LM head.
TARGET_WEIGHT_MARKERS = ("embed_tokens", "lm_head")
REQUIRED_CARD_FIELDS = ("base_model", "library_name", "tags")


class DraftFolderError(LongSpecError):
    """The folder cannot be published; `problems` lists every reason."""

    def __init__(self, folder: Path, problems: list[str]):
        self.folder, self.problems = folder, problems
        super().__init__(f"{folder} is not ready to publish:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class DraftFolderReport:
    folder: Path
    config: LongSpecDraftConfig
    card: ModelCard
    files: tuple[Path, ...]  # relative to folder: what an upload sends


def check_draft_folder(folder: str | Path, repo_id: str | None = None) -> DraftFolderReport:
    """Check config, weights and card of a draft folder; raise DraftFolderError listing all problems.

    repo_id: when given, the card's usage code must load the draft from that repository.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DraftFolderError(folder, ["not a directory"])
    problems: list[str] = []
    files = tuple(folder_files(folder))
    config = _check_config(folder, problems)
    _check_weight_formats(files, problems)
    tensors = _check_safetensors(folder, files, problems)
    if config is not None and tensors:
        _check_weights_match_config(config, tensors, problems)
    card = _check_card(folder, repo_id, problems)
    if card is not None and tensors:
        _check_card_names_these_weights(folder, card, problems)
    if problems:
        raise DraftFolderError(folder, problems)
    return DraftFolderReport(folder, config, card, files)


def _check_config(folder: Path, problems: list[str]) -> LongSpecDraftConfig | None:
    from transformers import AutoConfig

    if not (folder / "config.json").is_file():
        problems.append("config.json is missing (save the draft with draft.save_pretrained(folder))")
        return None
    try:
        config = AutoConfig.from_pretrained(str(folder), local_files_only=True)
    except Exception as error:  # noqa: BLE001 - any failure to load is the problem to report
        problems.append(f"config.json does not load: {type(error).__name__}: {error}")
        return None
    if not isinstance(config, LongSpecDraftConfig):
        problems.append(
            f"config.json is a {type(config).__name__} (model_type {config.model_type!r}), "
            f"not a LongSpecDraftConfig (model_type {LongSpecDraftConfig.model_type!r})"
        )
        return None
    return config


def _check_weight_formats(files: tuple[Path, ...], problems: list[str]) -> None:
    forbidden = [str(name) for name in files if name.suffix.lower() in FORBIDDEN_WEIGHT_SUFFIXES]
    if forbidden:
        problems.append(
            f"non-safetensors weight or checkpoint files: {', '.join(forbidden)} "
            "(publish safetensors only: remove them, e.g. Trainer checkpoints or pickles)"
        )


def _check_safetensors(folder: Path, files: tuple[Path, ...], problems: list[str]) -> dict[str, TensorInfo]:
    if not any(name.suffix == ".safetensors" for name in files):
        problems.append("no .safetensors weights (expected model.safetensors)")
        return {}
    try:
        tensors = draft_tensor_infos(folder)
    except Exception as error:  # noqa: BLE001
        problems.append(f"a safetensors file cannot be read: {type(error).__name__}: {error}")
        return {}
    target_keys = sorted(name for name in tensors if any(marker in name for marker in TARGET_WEIGHT_MARKERS))
    if target_keys:
        problems.append(
            f"target weights inside: {_some(target_keys)} (a LongSpec draft borrows the target's embeddings "
            "and LM head; save only the draft with LongSpecDraftModel.save_pretrained)"
        )
    return tensors


def _check_weights_match_config(config: LongSpecDraftConfig, tensors: dict[str, TensorInfo], problems) -> None:
    """The weights must load into a draft built from the config: same names, same shapes."""
    from ..modeling_longspec import LongSpecDraftModel

    with torch.device("meta"):
        expected = {name: tuple(t.shape) for name, t in LongSpecDraftModel(config).state_dict().items()}
    missing = sorted(set(expected) - set(tensors))
    unexpected = sorted(set(tensors) - set(expected))
    wrong = sorted(
        f"{name} {tensors[name].shape} != {expected[name]}"
        for name in set(expected) & set(tensors)
        if tensors[name].shape != expected[name]
    )
    if missing:
        problems.append(f"weights missing for the config: {_some(missing)}")
    if unexpected:
        problems.append(f"weights the draft does not have: {_some(unexpected)}")
    if wrong:
        problems.append(f"weight shapes differ from the config: {_some(wrong)}")


def _check_card(folder: Path, repo_id: str | None, problems: list[str]) -> ModelCard | None:
    path = folder / CARD_FILE
    hint = "write it with hf_longspec.publishing.write_card(folder, base_model=..., repo_id=...)"
    if not path.is_file():
        problems.append(f"{CARD_FILE} (the model card) is missing: {hint}")
        return None
    try:
        card = ModelCard.load(path)
    except Exception as error:  # noqa: BLE001
        problems.append(f"{CARD_FILE} does not parse as a model card: {error}; {hint}")
        return None
    missing = [name for name in REQUIRED_CARD_FIELDS if not getattr(card.data, name, None)]
    if missing:
        problems.append(f"{CARD_FILE} metadata lacks {', '.join(missing)}: {hint}")
    if repo_id is not None and f'"{repo_id}"' not in card.text:
        problems.append(f"{CARD_FILE}'s usage code does not load {repo_id!r}: {hint}")
    return card


def _check_card_names_these_weights(folder: Path, card: ModelCard, problems: list[str]) -> None:
    """A card whose measurements name their weights (publishing.weights_digest) must name these: a
    folder trained again after its card was rendered would otherwise publish the old draft's numbers."""
    named = set(re.findall(re.escape(DIGEST_PREFIX) + r"[0-9a-f]{16}", card.text))
    if not named:
        return
    held = folder_weights_digest(folder)
    if named != {held}:
        problems.append(
            f"{CARD_FILE} states measurements of the draft weights {', '.join(sorted(named))}, but the folder holds "
            f"{held}: measure this draft again and re-render the card (hf_longspec.publishing.write_card)"
        )


def _some(names: list[str], limit: int = 5) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")
