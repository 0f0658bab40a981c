"""The target's own writing at scale: greedy continuations of the draft's training chunks, as chat records.

    PYTHONPATH=src python benchmarks/make_target_text.py --out $W/target_text.jsonl --max-tokens 60000000 \
        --prompt-tokens 2048 --new-tokens 512 --batch-size 128 --time-budget 300 --data-cache /tmp/x2_data_cache
    hf-longspec train ... --corpus-mix chat=0.5,code=0.2,... --chat-data $W/target_text.jsonl --chat-windows end

Why: tau is measured on what the target writes after a long prompt, and the draft agrees with the
target far less there than on the prompt's human text (docs/training.md). Every long run so far read
its 60M tokens of human text five to six times, and the largest set of the target's own writing was
0.7M answer tokens (fourteenth session, `make_chat_data.py`: three processes, batches of 16 over
documents of mixed lengths, LongSpec decoding). This script writes far more per second: its prompts
are the training chunks themselves (already tokenized, all `--prompt-tokens` long, so every batch has
one shape and needs no padding), answered in large batches by vanilla `generate` with
`cache_implementation="static"` (on CUDA transformers auto-compiles a static-cache step; one shape should
mean one compile, not yet measured here). The
chunks come from the same loader as training (`--data-cache`: a run's cached chunks are loaded, not
tokenized again), train split only, so no eval file reaches the records. EAGLE regenerates its data
with the target for the same reason.

Each record is a chat record (training/chat_data.py; source "chat", task "continue", origin = the
chunk's corpus source, files = ["chunk:<index>"]) holding the chunk and the target's continuation, cut
at its end-of-text token. A summary JSON beside the records gives the answered tokens per second.
On the CPU (no compile; the same code path) use small numbers:

    PYTHONPATH=src python benchmarks/make_target_text.py --out /tmp/tt.jsonl --max-tokens 20000 \
        --prompt-tokens 256 --new-tokens 8 --batch-size 2 --num-prompts 4
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from hf_longspec.corpus import DEFAULT_MIX
from hf_longspec.embedded import load_target as _load_target
from hf_longspec.training.chat_data import CONTINUE_TASK, ChatPrompt, chat_records, write_chat_jsonl
from hf_longspec.training.run import TrainRecipe, build_dataset

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_chat_data import answer_in_groups  # noqa: E402  (the budgeted, grouped answering loop)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the jsonl file to write")
    parser.add_argument("--target", default="embedded", help="'embedded' or a local model folder")
    parser.add_argument("--gguf-file", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--corpus-mix", default=DEFAULT_MIX, help="the training mix whose chunks are continued")
    parser.add_argument("--max-tokens", type=int, default=60_000_000,
                        help="the loader's token budget (keep a training run's to load its --data-cache entry)")
    parser.add_argument("--prompt-tokens", type=int, default=2048, help="chunk length: every prompt has it")
    parser.add_argument("--new-tokens", type=int, default=512, help="continuation length limit")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--num-prompts", type=int, default=None,
                        help="chunks to continue (default: all), rounded down to whole batches")
    parser.add_argument("--seed", type=int, default=0, help="the loader's seed (a run's) and the chunks' order")
    parser.add_argument("--data-cache", default=None, help="a training run's --data-cache folder")
    parser.add_argument("--dynamic-cache", action="store_true",
                        help="plain DynamicCache instead of the static cache (no compile on CUDA)")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds: start no new group of batches after this, and write what was answered")
    return parser.parse_args(argv)


class ChunkPrompts(Sequence):
    """Continuation prompts of the loader's chunks in a given order, made when read: a time budget
    usually stops long before the last of ~30k chunks, whose ids as Python lists would take ~2 GB."""

    def __init__(self, chunks, order: list[int]):
        self.chunks, self.order = chunks, order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, item):
        if isinstance(item, slice):
            return [self[i] for i in range(*item.indices(len(self)))]
        index = self.order[item]
        source = self.chunks.source_names[int(self.chunks.chunk_sources[index])]
        return ChatPrompt(source, CONTINUE_TASK, "train", [f"chunk:{index}"], self.chunks.chunks[index].tolist())


def chunk_prompts(chunks, num_prompts: int | None, batch_size: int, seed: int) -> ChunkPrompts:
    """Continuation prompts of the loader's chunks in a seeded order, whole batches only (a smaller
    last batch would be a new shape to compile)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    count = len(chunks) if num_prompts is None else min(num_prompts, len(chunks))
    count -= count % batch_size
    if count == 0:
        raise ValueError(f"{len(chunks)} chunks and --num-prompts {num_prompts} make no whole batch of "
                         f"{batch_size}; allowed: a batch size up to the number of chunks")
    order = torch.randperm(len(chunks), generator=torch.Generator().manual_seed(seed))[:count].tolist()
    return ChunkPrompts(chunks, order)


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    target, tokenizer = _load_target(args.target, args.gguf_file, args.device)
    recipe = TrainRecipe(output_dir="", seq_len=args.prompt_tokens, max_tokens=args.max_tokens,
                         corpus_mix=args.corpus_mix, seed=args.seed, data_cache=args.data_cache)
    chunks = build_dataset(tokenizer, recipe)
    if "chat" in chunks.source_names:
        raise ValueError("--corpus-mix has a chat source: continue human text only (the records are the chat source)")
    prompts = chunk_prompts(chunks, args.num_prompts, args.batch_size, args.seed)
    loaded = time.perf_counter() - started
    print(f"{len(prompts)} prompts of {args.prompt_tokens} tokens from {len(chunks)} chunks ({loaded:.0f} s)", flush=True)
    extra = {} if args.dynamic_cache else {"cache_implementation": "static"}
    sequences = answer_in_groups(target, tokenizer, prompts, args.new_tokens, args.batch_size, started,
                                 args.time_budget, **extra)
    answering = time.perf_counter() - started - loaded
    records = chat_records(prompts[:len(sequences)], sequences, tokenizer)
    path = write_chat_jsonl(args.out, records)
    answered = sum(r["answer_tokens"] for r in records)
    summary = {
        "out": str(path), "records": len(records), "chunks": len(chunks), "target": args.target,
        "corpus_mix": args.corpus_mix, "max_tokens": args.max_tokens, "prompt_tokens": args.prompt_tokens,
        "new_tokens": args.new_tokens, "batch_size": args.batch_size, "seed": args.seed,
        "cache": "dynamic" if args.dynamic_cache else "static",
        "answer_tokens": answered, "answer_tokens_mean": answered / max(len(records), 1),
        "by_source": {s: sum(r["origin"] == s for r in records) for s in sorted({r["origin"] for r in records})},
        "load_seconds": loaded, "answer_seconds": answering,
        "answer_tokens_per_second": answered / answering if answering > 0 else None,
        "device": str(target.get_input_embeddings().weight.device),
        "dtype": str(target.get_input_embeddings().weight.dtype),
    }
    Path(str(path) + ".summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
