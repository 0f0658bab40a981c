"""Chat training data answered by the target itself (self-distillation), as a jsonl file.

    PYTHONPATH=src python benchmarks/make_chat_data.py --out $OUT/chat_train.jsonl \
        --num-prompts 2000 --document-tokens 2048 --max-new-tokens 256 --batch-size 16
    hf-longspec train --output runs/chat --corpus-mix chat --chat-data $OUT/chat_train.jsonl

Builds instruction prompts ("Summarize the following file:", "What does this code do?", ...) over
long local documents of one corpus split, renders them with the target's chat template, lets the
target answer greedily, and writes one record per prompt (token ids prompt + answer, the source,
task and file keys; see hf_longspec.training.chat_data). `--split eval` makes held-out chat prompts
from eval files only. Meant for the GPU; on the CPU use the embedded target with small numbers:

    PYTHONPATH=src python benchmarks/make_chat_data.py --out /tmp/chat.jsonl --num-prompts 2 \
        --document-tokens 256 --max-new-tokens 8
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from hf_longspec.embedded import load_target as _load_target
from hf_longspec.training.chat_data import (
    DEFAULT_CHAT_SOURCES, build_chat_prompts, chat_records, generate_chat_answers, write_chat_jsonl,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the jsonl file to write")
    parser.add_argument("--target", default="embedded", help="'embedded' or a local model folder")
    parser.add_argument("--gguf-file", default=None)
    parser.add_argument("--device", default=None)
    parser.add_argument("--split", choices=["train", "eval"], default="train")
    parser.add_argument("--num-prompts", type=int, default=64)
    parser.add_argument("--document-tokens", type=int, default=2048, help="tokens of local text per prompt")
    parser.add_argument("--max-new-tokens", type=int, default=256, help="answer length limit")
    parser.add_argument("--sources", nargs="+", default=list(DEFAULT_CHAT_SOURCES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--continuation-share", type=float, default=0.0,
                        help="share of prompts that are the bare document, continued by the target (task 'continue')")
    parser.add_argument("--batch-size", type=int, default=16,
                        help="prompts answered per generate() call (left-padded; 1: one at a time)")
    parser.add_argument("--draft", default="none",
                        help="'none' (plain greedy generate) or 'embedded' / a draft folder: LongSpec decoding, "
                             "lossless, so the same answers, faster")
    parser.add_argument("--no-compile", action="store_true",
                        help="CUDA: LongSpec rounds captured as graphs without torch.compile. Compiling costs "
                             "35-45 s per new shape (batches of other prompt lengths, the last smaller batch) "
                             "before the first answer; in the tenth session it most likely took the whole 110 s budget")
    parser.add_argument("--time-budget", type=float, default=None,
                        help="seconds: start no new group of batches after this, and write what was answered "
                             "(a device call's time limit then loses nothing)")
    return parser.parse_args(argv)


def answer_in_groups(target, tokenizer, prompts, max_new_tokens: int, batch_size: int, started: float,
                     time_budget: float | None = None, **generate_kwargs) -> list[list[int]]:
    """Answers of the leading prompts, four batches at a time with a progress line after each group;
    once `time_budget` seconds have passed since `started`, no new group starts (the first always runs).
    build_chat_prompts cycles through the sources, so the answered prefix keeps their mix."""
    sequences = []
    step = 4 * batch_size
    for start in range(0, len(prompts), step):
        if start and time_budget is not None and time.perf_counter() - started > time_budget:
            print(f"time budget of {time_budget:.0f} s spent: stopping at {len(sequences)}/{len(prompts)}", flush=True)
            break
        sequences += generate_chat_answers(target, tokenizer, prompts[start:start + step], max_new_tokens,
                                           batch_size=batch_size, **generate_kwargs)
        print(f"answered {len(sequences)}/{len(prompts)} ({time.perf_counter() - started:.0f} s)", flush=True)
    return sequences


def main(argv=None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    target, tokenizer = _load_target(args.target, args.gguf_file, args.device)
    extra = {}
    if args.draft != "none":
        from hf_longspec.demo import load_draft_for

        extra["assistant_model"], _ = load_draft_for(target, args.draft)
        if args.no_compile:
            extra["longspec_compile"] = False
    prompts = build_chat_prompts(tokenizer, args.num_prompts, args.document_tokens, tuple(args.sources),
                                 split=args.split, seed=args.seed, continuation_share=args.continuation_share)
    print(f"{len(prompts)} prompts ({time.perf_counter() - started:.0f} s)", flush=True)
    sequences = answer_in_groups(target, tokenizer, prompts, args.max_new_tokens, args.batch_size, started,
                                 args.time_budget, **extra)
    records = chat_records(prompts[:len(sequences)], sequences, tokenizer)
    path = write_chat_jsonl(args.out, records)
    answers = [r["answer_tokens"] for r in records]
    summary = {
        "out": str(path), "records": len(records), "prompts_drawn": len(prompts), "split": args.split, "target": args.target,
        "prompt_tokens_mean": sum(r["prompt_tokens"] for r in records) / max(len(records), 1),
        "answer_tokens_mean": sum(answers) / max(len(answers), 1),
        "by_source": {s: sum(r["origin"] == s for r in records) for s in sorted({r["origin"] for r in records})},
        "by_task": {t: sum(r["task"] == t for r in records) for t in sorted({r["task"] for r in records})},
        "seconds": time.perf_counter() - started,
    }
    Path(str(path) + ".summary.json").write_text(json.dumps(summary, indent=2))
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
