"""Timing pieces for plain-step studies (docs/results/session39_2026-12-05/plain_step_costs.py,
docs/results/session40_2026-12-05/plain_step_attention_ab.py): a policy that takes plain steps only and keeps
each one's seconds, and a streamer that stamps each emitted token (vanilla's per-step gaps)."""

import time

from transformers.generation.streamers import BaseStreamer

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
