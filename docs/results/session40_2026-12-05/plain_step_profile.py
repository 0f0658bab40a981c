"""OMP_NUM_THREADS=2 PYTHONPATH=src python docs/results/session40_2026-12-05/plain_step_profile.py

Where a plain step's time went against a vanilla static step's: torch.profiler over 20 decode steps of each (tokens 3 to 23, so the prefill is outside),
8000-token prose, float32, this CPU; self CPU time per step of the top operators. The plain step runs twice: with
its one SDPA call (since the fortieth session) and with the custom op's prefix + tree + merge it replaced."""
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

from hf_longspec.attention import hybrid
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.demo import load_draft_for
from hf_longspec.embedded import load_embedded_target
from hf_longspec.generation import loop

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from plain_step_timing import AlwaysPlain, TokenStamps  # noqa: E402


class ProfiledSteps(TokenStamps):
    """Profiles from the 3rd token emitted to the 23rd: decode steps only."""

    def __init__(self):
        super().__init__()
        self.profiler = profile(activities=[ProfilerActivity.CPU])

    def put(self, value):
        super().put(value)
        if len(self.times) == 3:
            self.profiler.start()
        if len(self.times) == 23:
            self.profiler.stop()


target, tokenizer = load_embedded_target(device="cpu")
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tokenizer, 8000, kind="prose", split="eval", seed=0)])
loop.PlainStepPolicy = AlwaysPlain
one_sdpa_call = hybrid._root_alone_attention


def prefix_tree_merge(query, key_buffer, value_buffer, prefix_lengths, scale):
    mask = torch.ones(query.shape[0], 1, 1, dtype=torch.bool, device=query.device)
    return hybrid.cached_tree_attention(query, key_buffer, value_buffer, mask, prefix_lengths, scale)


plain = dict(assistant_model=draft, longspec_plain_steps=True)
methods = (("vanilla static", dict(cache_implementation="static"), None), ("plain step", plain, one_sdpa_call),
           ("plain step, prefix + tree + merge", plain, prefix_tree_merge))
for name, kwargs, attention in methods:
    if attention is not None:
        hybrid._root_alone_attention = attention
    steps = ProfiledSteps()
    target.generate(ids, max_new_tokens=30, do_sample=False, streamer=steps, **kwargs)
    wall = (steps.times[22] - steps.times[2]) / 20
    events = sorted(((e.self_cpu_time_total / 20 / 1000, e.count / 20, e.key) for e in steps.profiler.key_averages()),
                    reverse=True)
    print(f"== {name}: wall {wall * 1000:.1f} ms per step, self CPU {sum(e[0] for e in events):.1f} ms")
    for ms, count, key in events[:6]:
        print(f"  {ms:7.2f} ms  {count:7.1f} calls/step  {key}")
