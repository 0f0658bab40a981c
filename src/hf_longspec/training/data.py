"""Training data: fixed-length token chunks of real local text (corpus.py), tokenized once.

Two ways to choose the text:
- `kinds` (the original behaviour): every file of those kinds, shuffled together, so each kind
  contributes in proportion to its size on the machine;
- `mix` (a preset name, 'code=0.4,docs=0.3,...' or a dict; see `corpus.parse_mix`): each source
  gets its weight's share of `max_tokens`. A source that runs out (after `max_epochs` passes) gives
  the rest of its share to the others in proportion to their weights; what was actually used is
  in `mix_report` (per source: weight, tokens, share, documents read, epochs over the source when
  it was read to the end, short = it ran out before its share). Chat data (training/chat_data.py
  jsonl files) is the source "chat".
Chunks never mix sources (each source is its own token stream), so `chunk_sources` names the
source of every chunk.

Chat records (pre-tokenized prompt + target answer) are cut one of two ways (`chat_windows`):
'stream' concatenates them like files, so a chunk boundary falls anywhere, often between a
document and the target's answer to it; 'end' gives every record one chunk that ends where its
answer ends (the record's last `seq_len` tokens, or the previous record's tail before a short one),
so each answer token is trained with as much of its own document before it as fits.

`prompt_mask` (when chat records are mixed in) marks, chunk by chunk, the tokens that are a record's
prompt (its document and instruction) or the separator after it: text the target did not write. The
collator turns it into a loss mask for `chat_loss="answer"` (training/run.py), so a record's loss is
taken on the target's own answer only; corpus text is never masked.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import NamedTuple

import torch
from torch.utils.data import Dataset

from ..corpus import SOURCES, documents, parse_mix, plan_mix, read_document
from ..errors import TrainingRecipeError

_BATCH_FILES = 64
CHAT_WINDOWS = ("stream", "end")


class _Record(NamedTuple):
    """A pre-tokenized chat record: prompt + the target's answer."""

    ids: list[int]
    prompt_tokens: int  # the answer starts here


class LocalTextChunks(Dataset):
    """`seq_len`-token chunks cut from local text of one split."""

    def __init__(self, tokenizer, seq_len: int, max_tokens: int, kinds=("code", "prose"), split: str = "train",
                 seed: int = 0, packages: tuple[str, ...] | None = None, mix=None, chat_data=(),
                 max_epochs: float = 1.0, roots=None, chat_windows: str = "stream"):
        self.seq_len = seq_len
        if chat_windows not in CHAT_WINDOWS:
            raise TrainingRecipeError(f"chat_windows={chat_windows!r}; allowed: {CHAT_WINDOWS}.")
        self.chat_windows = chat_windows
        if mix is None:
            self._from_kinds(tokenizer, max_tokens, tuple(kinds), split, seed, packages, roots)
        else:
            self._from_mix(tokenizer, max_tokens, parse_mix(mix), split, seed, packages, tuple(chat_data),
                           max_epochs, roots)

    # the original loader: natural proportions
    def _from_kinds(self, tokenizer, max_tokens, kinds, split, seed, packages, roots):
        docs = [d for kind in kinds for d in documents(kind, split, packages, roots)]
        if not docs:
            raise FileNotFoundError(f"no local text files for kinds={kinds}, split={split}")
        random.Random(seed).shuffle(docs)
        eos = tokenizer.eos_token_id
        stream: list[int] = []
        batch: list[str] = []
        for document in docs:
            text = read_document(document)  # the legacy kinds read files as plain UTF-8, as before
            if text:
                batch.append(text)
            if len(batch) == _BATCH_FILES:
                stream += _encode_all(tokenizer, batch, eos)
                batch = []
                if len(stream) >= max_tokens:
                    break
        if batch and len(stream) < max_tokens:
            stream += _encode_all(tokenizer, batch, eos)
        usable = min(len(stream), max_tokens) // self.seq_len * self.seq_len
        if usable == 0 and len(stream) >= self.seq_len:
            raise TrainingRecipeError(
                f"max_tokens={max_tokens} is less than seq_len={self.seq_len}: not one {self.seq_len}-token chunk fits "
                "in the token budget. Allowed: max_tokens >= seq_len."
            )
        if usable == 0:
            raise TrainingRecipeError(
                f"only {len(stream)} tokens of local {'/'.join(kinds)} text ({split} split) were found; need at least "
                f"seq_len={self.seq_len}. Allowed: a smaller seq_len, or more local text of these kinds."
            )
        self.chunks = torch.tensor(stream[:usable], dtype=torch.long).view(-1, self.seq_len)
        self.source_names = ("+".join(kinds),)
        self.chunk_sources = torch.zeros(len(self.chunks), dtype=torch.long)
        self.prompt_mask = None
        self.mix_report = None

    # weighted sources
    def _from_mix(self, tokenizer, max_tokens, weights, split, seed, packages, chat_data, max_epochs, roots):
        weights = {name: w for name, w in weights.items() if w > 0}
        eos = tokenizer.eos_token_id
        streams = {}
        for name in weights:
            items = _chat_items(chat_data, split, len(tokenizer)) if name == "chat" else list(
                documents(name, split, packages, roots))
            random.Random(seed * 1_000_003 + zlib.crc32(name.encode())).shuffle(items)
            streams[name] = _SourceStream(name, items, tokenizer, eos, self.seq_len,
                                          align_records=name == "chat" and self.chat_windows == "end")
        # fill every source to its planned share; when a source runs out, plan again knowing its size
        for _ in range(len(streams) + 1):
            known = {name: float(s.size) for name, s in streams.items() if s.exhausted}
            targets = plan_mix(weights, known, max_tokens, max_epochs)
            for name, stream in streams.items():
                stream.fill(targets[name])
            if all(name in known for name, s in streams.items() if s.exhausted):
                break
        chunks, masks, sources, report = [], [], [], {}
        for index, (name, stream) in enumerate(streams.items()):
            ids, mask = stream.take(min(targets[name], stream.size * max_epochs))
            count = len(ids) // self.seq_len
            if count:
                chunks.append(ids.view(count, self.seq_len))
                masks.append(mask.view(count, self.seq_len))
                sources.append(torch.full((count,), index, dtype=torch.long))
            report[name] = {"weight": weights[name], "tokens": count * self.seq_len, "documents": stream.used,
                            "short": stream.exhausted and stream.size * max_epochs < weights[name] * max_tokens,
                            # passes over the whole source; None when it was not read to the end
                            "epochs": count * self.seq_len / stream.size if stream.exhausted and stream.size
                            else None}
        total = sum(row["tokens"] for row in report.values())
        if total == 0:
            raise TrainingRecipeError(f"no local text for the corpus mix {weights} (split={split}); "
                                      f"need at least seq_len={self.seq_len} tokens")
        for row in report.values():
            row["share"] = row["tokens"] / total
        self.chunks = torch.cat(chunks)
        self.prompt_mask = torch.cat(masks) if "chat" in streams else None
        self.chunk_sources = torch.cat(sources)
        self.source_names = tuple(streams)
        self.mix_report = report

    def state(self) -> dict:
        """Everything the chunks are, for a cached copy (training/data_cache.py); ids kept as int32."""
        return {"seq_len": self.seq_len, "chat_windows": self.chat_windows, "chunks": self.chunks.to(torch.int32),
                "chunk_sources": self.chunk_sources, "prompt_mask": self.prompt_mask,
                "source_names": list(self.source_names), "mix_report": self.mix_report}

    @classmethod
    def from_state(cls, state: dict) -> "LocalTextChunks":
        """The chunks `state()` saved, without reading or tokenizing any text."""
        dataset = cls.__new__(cls)
        dataset.seq_len, dataset.chat_windows = state["seq_len"], state["chat_windows"]
        dataset.chunks = state["chunks"].to(torch.long)
        dataset.chunk_sources, dataset.prompt_mask = state["chunk_sources"], state["prompt_mask"]
        dataset.source_names, dataset.mix_report = tuple(state["source_names"]), state["mix_report"]
        return dataset

    def __len__(self) -> int:
        return self.chunks.shape[0]

    def __getitem__(self, index: int) -> dict:
        item = {"input_ids": self.chunks[index], "index": index}
        if self.prompt_mask is not None:
            item["prompt_mask"] = self.prompt_mask[index]
        return item

    def source_shares(self) -> dict[str, float]:
        """Fraction of chunks from each source."""
        counts = torch.bincount(self.chunk_sources, minlength=len(self.source_names))
        return {name: int(c) / max(len(self), 1) for name, c in zip(self.source_names, counts)}


class _SourceStream:
    """One source's documents, tokenized lazily in batches until a token target is reached.
    `align_records`: chunks end where pre-tokenized records end (chat_windows='end')."""

    def __init__(self, name, items, tokenizer, eos, seq_len: int, align_records: bool = False):
        self.name, self.items, self.tokenizer, self.eos = name, items, tokenizer, eos
        self.seq_len, self.align_records = seq_len, align_records
        self.position, self.used, self.tokens = 0, 0, 0
        self.pieces: list[torch.Tensor] = []
        self.mask_pieces: list[torch.Tensor] = []  # True: a record's prompt or the separator after it
        self.record_ends: list[int] = []  # stream offsets just past each record's EOS

    @property
    def exhausted(self) -> bool:
        return self.position >= len(self.items)

    @property
    def size(self) -> int:
        """Tokens that `take` can give without repeating."""
        if self.align_records:
            return sum(end >= self.seq_len for end in self.record_ends) * self.seq_len
        return self.tokens

    def fill(self, target: float) -> None:
        while self.size < target and not self.exhausted:
            batch = self.items[self.position:self.position + _BATCH_FILES]
            self.position += len(batch)
            texts, ready = [], []
            for item in batch:
                if isinstance(item, _Record):  # pre-tokenized (chat records)
                    ready.append(item)
                else:
                    text = read_document(item)
                    if text:
                        texts.append(text)
            ids = _encode_all(self.tokenizer, texts, self.eos) if texts else []
            text_tokens = len(ids)
            prompt: list[bool] = []  # the records' part of the mask; corpus text is never a prompt
            separator = [self.eos] if self.eos is not None else []
            for record in ready:
                ids += record.ids + separator
                answer = len(record.ids) - record.prompt_tokens
                prompt += [True] * record.prompt_tokens + [False] * answer + [True] * len(separator)
                self.record_ends.append(self.tokens + len(ids))
            self.used += len(texts) + len(ready)
            if ids:
                self.pieces.append(torch.tensor(ids, dtype=torch.long))
                self.mask_pieces.append(torch.cat([torch.zeros(text_tokens, dtype=torch.bool),
                                                   torch.tensor(prompt, dtype=torch.bool)]))
                self.tokens += len(ids)

    def take(self, budget: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The first `budget` tokens (whole chunks), repeating the stream if the budget is larger, and
        their prompt mask."""
        seq_len = self.seq_len
        if not self.pieces:
            return torch.zeros(0, dtype=torch.long), torch.zeros(0, dtype=torch.bool)
        stream, mask = torch.cat(self.pieces), torch.cat(self.mask_pieces)
        if self.align_records:  # one chunk per record, ending at its end
            ends = [end for end in self.record_ends if end >= seq_len]
            if not ends:
                return stream[:0], mask[:0]
            stream = torch.cat([stream[end - seq_len:end] for end in ends])
            mask = torch.cat([mask[end - seq_len:end] for end in ends])
        wanted = int(budget) // seq_len * seq_len
        if wanted > len(stream):
            repeats = -(-wanted // len(stream))
            stream, mask = stream.repeat(repeats), mask.repeat(repeats)
        return stream[:wanted], mask[:wanted]


def _chat_items(paths, split: str, vocab_size: int) -> list[_Record]:
    from .chat_data import read_chat_jsonl

    items = []
    for path in [paths] if isinstance(paths, (str, Path)) else paths:  # one file at a time: errors name it
        wanted = None if split == "all" else split
        for number, record in enumerate(read_chat_jsonl(path, split=wanted), start=1):
            ids = record["input_ids"]
            where = f"chat record {number} of {path}" + (f" (of its {wanted} split)" if wanted else "")
            if ids and max(ids) >= vocab_size:
                raise ValueError(f"{where} has token id {max(ids)} >= vocabulary size {vocab_size}: "
                                 "it was made with another tokenizer")
            if "prompt_tokens" in record:
                prompt_tokens = int(record["prompt_tokens"])
            elif "answer_tokens" in record:
                prompt_tokens = len(ids) - int(record["answer_tokens"])
            else:
                raise ValueError(f"{where} has neither prompt_tokens nor answer_tokens, so where its answer starts "
                                 "is unknown; records of training/chat_data.py chat_records carry both")
            if not 0 <= prompt_tokens < len(ids):
                raise ValueError(f"{where}: prompt_tokens={prompt_tokens} leaves no answer in its {len(ids)} tokens; "
                                 "allowed: 0 <= prompt_tokens < len(input_ids)")
            items.append(_Record(ids, prompt_tokens))
    return items


def _encode_all(tokenizer, texts: list[str], eos: int | None) -> list[int]:
    ids: list[int] = []
    for encoded in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        ids += encoded + ([eos] if eos is not None else [])
    return ids


__all__ = ["LocalTextChunks", "SOURCES"]
