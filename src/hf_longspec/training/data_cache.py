"""Tokenized training chunks kept on disk between runs (`TrainRecipe.data_cache`, `--data-cache DIR`).

A long run continued call after call (`--max-seconds` / `--resume`) tokenizes its whole corpus again
at every start: 60M tokens, within the 98-114 s each one-GPU call of the fifteenth session spent
outside training (docs/distributed.md). With a cache folder the first start saves the chunks and later starts on the
same machine, or other runs with the same data, load them.

An entry is named by a fingerprint of everything its chunks depend on: the arguments the loader is
given (training/run.py `loader_arguments`), the tokenizer (its class, its serialized form when it has one, and the tokenizer
libraries' versions), every source file's path, size and modification time, and the source of the
code that reads and cuts the text. An edited or upgraded file, another tokenizer or a changed loader
therefore makes a new entry, not a stale hit; a file rewritten with the same size and modification
time (`cp -p`, `touch -r`) is the one change it cannot see. An entry is written to a unique temporary
file and renamed, so ranks that build the same one at once cannot leave half a file; an entry that
cannot be written or read is rebuilt, with a warning, rather than failing the run.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path

import tokenizers
import torch
import transformers

from .. import corpus
from . import chat_data, data
from .data import LocalTextChunks


def _tokenizer_identity(tokenizer) -> str:
    """The tokenizer's class and, when it has one, its whole serialized form (a fast tokenizer:
    vocabulary, merges, normalizer, special tokens), else its vocabulary and size."""
    identity = f"{type(tokenizer).__module__}.{type(tokenizer).__qualname__}:{len(tokenizer)}"
    identity += f":eos={tokenizer.eos_token_id}:tokenizers={tokenizers.__version__}:transformers={transformers.__version__}"
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return identity + backend.to_str()
    if hasattr(tokenizer, "get_vocab"):
        return identity + json.dumps(sorted(tokenizer.get_vocab().items()))
    return identity


def _source_files(arguments: dict) -> list[Path]:
    """Every file the chunks can be read from: the train-split documents of the kinds or of the mix's
    sources, and the chat record files."""
    if "kinds" in arguments:
        names = list(arguments["kinds"])
    else:
        names = [name for name, weight in corpus.parse_mix(arguments["mix"]).items() if weight > 0 and name != "chat"]
    files = [document.path for name in names for document in corpus.documents(name, "train", None, None)]
    return files + [Path(path).resolve() for path in arguments.get("chat_data", ())]  # corpus paths are absolute


def data_fingerprint(tokenizer, arguments: dict) -> str:
    """A name for the chunks `LocalTextChunks(tokenizer, **arguments)` gives (training/run.py
    `loader_arguments`; see the module docstring)."""
    digest = hashlib.sha256(json.dumps(arguments, sort_keys=True, default=str).encode())
    digest.update(_tokenizer_identity(tokenizer).encode())
    for path in _source_files(arguments):
        try:
            stat = path.stat()
            digest.update(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        except OSError:  # missing or unreadable: the build names it
            digest.update(f"{path}\0missing\n".encode())
    for module in (corpus, data, chat_data):  # the code that reads, tokenizes and cuts the text
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:24]


def load_or_build(folder: str, tokenizer, arguments: dict) -> LocalTextChunks:
    """The cached chunks for this tokenizer and these loader arguments, or new ones, saved for the
    next start."""
    path = Path(folder) / f"chunks-{data_fingerprint(tokenizer, arguments)}.pt"
    if path.is_file():
        try:
            return LocalTextChunks.from_state(torch.load(path, weights_only=True))
        except Exception as error:  # a truncated or foreign file: tokenize again and replace it
            warnings.warn(f"data cache entry {path} could not be read ({error}); tokenizing again", stacklevel=2)
    path.parent.mkdir(parents=True, exist_ok=True)  # an unusable folder fails here, before the tokenizing
    dataset = LocalTextChunks(tokenizer, **arguments)
    handle, partial = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".partial")  # unique per writer
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(dataset.state(), file)
        os.chmod(partial, 0o644)  # mkstemp's 0600 would keep a shared cache from other users
        os.replace(partial, path)
    except Exception as error:  # a full disk: the run goes on with the chunks it has
        Path(partial).unlink(missing_ok=True)
        warnings.warn(f"data cache entry {path} could not be written ({error}); training without it", stacklevel=2)
    return dataset
