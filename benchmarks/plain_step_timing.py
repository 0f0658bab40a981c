"""Timing pieces for plain-step studies (docs/results/session39_2026-12-05/plain_step_costs.py,
docs/results/session40_2026-12-05/plain_step_attention_ab.py, the policy A/Bs of the fortieth and forty-first
sessions): a policy that takes plain steps only and keeps each one's seconds, a streamer that stamps each emitted
token (vanilla's per-step gaps), and policies timed against vanilla static, interleaved per prompt."""

import json
import time
from pathlib import Path

import torch

from transformers.generation.streamers import BaseStreamer

from hf_longspec.generation import loop
from hf_longspec.generation.plain_steps import PlainStepPolicy

plain_step_seconds: list[float] = []  # filled by AlwaysPlain; clear it before each call


class AlwaysPlain(PlainStepPolicy):
    """Every step plain: install with ``loop.PlainStepPolicy = AlwaysPlain`` and ask ``longspec_plain_steps=True``."""

    def plain_next(self):
        return True

    def record(self, plain, tokens, seconds, timed=True, chain_hit=False):
        if plain:
            plain_step_seconds.append(seconds)


class TokenStamps(BaseStreamer):
    """The wall-clock time of each put(): the prompt's, then each new token's."""

    def __init__(self):
        self.times = []

    def put(self, value):
        self.times.append(time.perf_counter())

    def end(self):
        pass


def policies_against_vanilla(out: str, kind: str, repeats: int, policies: dict) -> list[dict]:
    """Each of ``policies`` (name -> PlainStepPolicy factory) in LongSpec generate() beside vanilla static,
    interleaved per prompt (the order reversed on odd repeats), on decode_bench's three 8000-token prompts of
    ``kind``, 128 new tokens, float32 on the CPU; decode rates as decode_bench takes them. Prints a line per call,
    checks every output against vanilla's and writes the records to ``out``."""
    import decode_bench
    from hf_longspec.bench.workloads import build_workloads
    from hf_longspec.embedded import load_embedded_draft, load_embedded_target

    target, tokenizer = load_embedded_target(device="cpu")
    drafts = {True: load_embedded_draft(target)}
    records = []
    for repeat in range(repeats):
        for w in build_workloads(tokenizer, [8000], [kind], 3, seed=0):
            ids = torch.tensor([w.input_ids])
            order = ["vanilla_static", *policies]
            for name in order if repeat % 2 == 0 else order[::-1]:
                loop.PlainStepPolicy = policies.get(name, PlainStepPolicy)
                try:
                    record = decode_bench.run(target, drafts, "longspec" if name in policies else name, ids, 128)
                finally:
                    loop.PlainStepPolicy = PlainStepPolicy
                record.update(variant=name, prompt=w.index, repeat=repeat, kind=kind)
                records.append(record)
                stats = record.get("stats", {})
                print(f"{w.name} r{repeat} {name}: {record['decode_tokens_per_s']:.2f} tok/s"
                      + (f" tau {stats['tau']:.2f} rounds {stats['rounds']} plain steps {stats['plain_steps']}"
                         if stats else ""), flush=True)
    for r in records:
        same = next(v for v in records if v["variant"] == "vanilla_static" and v["prompt"] == r["prompt"]
                    and v["repeat"] == r["repeat"])
        assert r["tokens"] == same["tokens"], (r["variant"], r["prompt"], r["repeat"])
    Path(out).write_text(json.dumps(records))
    print("every output equals vanilla's")
    return records
