"""Training data: fixed-length token chunks of real local text (corpus.py), tokenized once."""

from __future__ import annotations

import random

import torch
from torch.utils.data import Dataset

from ..corpus import read_text, text_files
from ..errors import TrainingRecipeError


class LocalTextChunks(Dataset):
    """`seq_len`-token chunks cut from local code and prose files of one split."""

    def __init__(self, tokenizer, seq_len: int, max_tokens: int, kinds=("code", "prose"), split: str = "train",
                 seed: int = 0, packages: tuple[str, ...] | None = None):
        files = [path for kind in kinds for path in text_files(kind, split, packages)]
        if not files:
            raise FileNotFoundError(f"no local text files for kinds={kinds}, split={split}")
        random.Random(seed).shuffle(files)
        eos = tokenizer.eos_token_id
        stream: list[int] = []
        batch: list[str] = []
        for path in files:
            batch.append(read_text(path))
            if len(batch) == 64:
                stream += _encode_all(tokenizer, batch, eos)
                batch = []
                if len(stream) >= max_tokens:
                    break
        if batch and len(stream) < max_tokens:
            stream += _encode_all(tokenizer, batch, eos)
        usable = min(len(stream), max_tokens) // seq_len * seq_len
        if usable == 0 and len(stream) >= seq_len:
            raise TrainingRecipeError(
                f"max_tokens={max_tokens} is less than seq_len={seq_len}: not one {seq_len}-token chunk fits in the "
                "token budget. Allowed: max_tokens >= seq_len."
            )
        if usable == 0:
            raise TrainingRecipeError(
                f"only {len(stream)} tokens of local {'/'.join(kinds)} text ({split} split) were found; need at least "
                f"seq_len={seq_len}. Allowed: a smaller seq_len, or more local text of these kinds."
            )
        self.chunks = torch.tensor(stream[:usable], dtype=torch.long).view(-1, seq_len)

    def __len__(self) -> int:
        return self.chunks.shape[0]

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.chunks[index], "index": index}


def _encode_all(tokenizer, texts: list[str], eos: int | None) -> list[int]:
    ids: list[int] = []
    for encoded in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        ids += encoded + ([eos] if eos is not None else [])
    return ids
