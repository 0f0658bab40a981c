"""Tokenized training chunks kept on disk between runs (`TrainRecipe.data_cache`, `--data-cache DIR`).

A long run continued call after call (`--max-seconds` / `--resume`) tokenizes its whole corpus again
at every start: 60M tokens took most of the 97-114 s each one-GPU call spent outside training
(docs/distributed.md). With a cache folder the first start saves the chunks and later starts on the
same machine, or other runs with the same data, load them.

An entry is named by a fingerprint of everything its chunks depend on: the recipe's data fields, the
tokenizer (its serialized form when it has one), every source file's path, size and modification
time, and the source of the modules that read and cut the text. An edited or upgraded file, another
tokenizer or a changed loader therefore makes a new entry, never a stale hit. An entry is written to
a temporary name and renamed, so ranks that build the same one at once cannot leave half a file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import torch

from .. import corpus
from . import data
from .data import LocalTextChunks

# the recipe fields that decide the chunks (TrainRecipe); the rest (learning rate, steps, ...) do not
DATA_FIELDS = ("seq_len", "max_tokens", "kinds", "corpus_mix", "chat_data", "corpus_max_epochs", "chat_windows",
               "seed")


def _tokenizer_identity(tokenizer) -> str:
    """The tokenizer's whole serialized form when it has one (a fast tokenizer: vocabulary, merges,
    normalizer, special tokens), else its vocabulary, else its class and size."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return backend.to_str()
    if hasattr(tokenizer, "get_vocab"):
        return json.dumps(sorted(tokenizer.get_vocab().items()))
    return f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}:{len(tokenizer)}"


def _source_files(recipe) -> list[Path]:
    """Every file the recipe's chunks can be read from: its kinds' or its mix's train-split
    documents, and its chat record files."""
    if recipe.corpus_mix is None:
        names = list(recipe.kinds)
    else:
        names = [name for name, weight in corpus.parse_mix(recipe.corpus_mix).items() if weight > 0 and name != "chat"]
    files = [document.path for name in names for document in corpus.documents(name, "train", None, None)]
    return files + [Path(path) for path in recipe.chat_data]


def data_fingerprint(tokenizer, recipe) -> str:
    """A name for the chunks `build_dataset(tokenizer, recipe)` gives (see the module docstring)."""
    digest = hashlib.sha256()
    fields = {name: getattr(recipe, name) for name in DATA_FIELDS}
    digest.update(json.dumps(fields, sort_keys=True, default=str).encode())
    digest.update(_tokenizer_identity(tokenizer).encode())
    digest.update(f"eos={tokenizer.eos_token_id}".encode())
    for path in _source_files(recipe):
        stat = path.stat() if path.exists() else None  # a missing file: the build names it
        digest.update(f"{path}\0{stat and stat.st_size}\0{stat and stat.st_mtime_ns}\n".encode())
    for module in (corpus, data):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:24]


def load_or_build(folder: str, tokenizer, recipe, build) -> LocalTextChunks:
    """The cached chunks for this tokenizer and recipe, or `build()`'s, saved for the next start."""
    path = Path(folder) / f"chunks-{data_fingerprint(tokenizer, recipe)}.pt"
    if path.is_file():
        return LocalTextChunks.from_state(torch.load(path, weights_only=True))
    dataset = build()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    torch.save(dataset.state(), partial)
    os.replace(partial, path)
    return dataset
