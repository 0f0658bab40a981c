"""What `--data-cache` saves a resumed start: the training chunks built by tokenizing, then loaded from
the cache, each in a fresh process (as a resumed call starts), with the embedded tokenizer.

    python benchmarks/data_cache_bench.py --max-tokens 10000000

Prints one markdown row per start: the seconds of the cache key (`data_fingerprint`, first in the
process, so it finds the source files as a start does), then of `build_dataset` (the key again, now on
listed files, and the tokenizing or the load), their sum (the tokenizer's load is not counted), the
tokens, and a digest of the chunks, which must agree. The cache folder is temporary unless --cache
names one (an existing entry there makes the first start a load too).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time


def start(cache: str, max_tokens: int, seq_len: int) -> dict:
    """One start, in this process: the tokenizer loaded, then the chunks built or loaded and timed."""
    from hf_longspec.embedded import load_tokenizer
    from hf_longspec.training.data_cache import data_fingerprint
    from hf_longspec.training.run import TrainRecipe, build_dataset, loader_arguments

    tokenizer = load_tokenizer()
    recipe = TrainRecipe(output_dir="", seq_len=seq_len, max_tokens=max_tokens, data_cache=cache)
    began = time.perf_counter()
    data_fingerprint(tokenizer, loader_arguments(recipe))  # finds, stats and hashes the source files
    key_seconds = time.perf_counter() - began
    began = time.perf_counter()
    dataset = build_dataset(tokenizer, recipe)
    build_seconds = time.perf_counter() - began
    digest = hashlib.sha256(dataset.chunks.numpy().tobytes()).hexdigest()[:16]
    return {"key_seconds": key_seconds, "build_seconds": build_seconds, "tokens": dataset.chunks.numel(),
            "digest": digest}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-tokens", type=int, default=10_000_000)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--cache", default=None, help="cache folder (default: a new temporary one)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(start(args.cache, args.max_tokens, args.seq_len)))
        return 0
    cache = args.cache or tempfile.mkdtemp(prefix="data_cache_bench_")
    rows = []
    for name in ("first start (tokenize, save)", "resumed start (load)"):
        child = subprocess.run([sys.executable, __file__, "--child", "--cache", cache, "--max-tokens",
                                str(args.max_tokens), "--seq-len", str(args.seq_len)],
                               capture_output=True, text=True, check=True)
        rows.append({"start": name, **json.loads(child.stdout.strip().splitlines()[-1])})
    print(f"cache: {cache}\n\n| start | cache key (s) | build_dataset (s) | start (s) | tokens | chunks digest |\n"
          "|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['start']} | {row['key_seconds']:.1f} | {row['build_seconds']:.1f} | "
              f"{row['key_seconds'] + row['build_seconds']:.1f} | {row['tokens']:,} | {row['digest']} |")
    if rows[0]["digest"] != rows[1]["digest"]:
        print("the loaded chunks differ from the built ones")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
