"""PYTHONPATH=src python docs/results/session39_2026-12-05/plain_step_costs.py 8000

Median wall time of a plain step (generate with every step plain) against a vanilla static step, 8k prose, CPU."""
import statistics, sys, time
import torch
from transformers.generation.streamers import BaseStreamer
from hf_longspec.embedded import load_embedded_target
from hf_longspec.demo import load_draft_for
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.generation import loop
from hf_longspec.generation.plain_steps import PlainStepPolicy

seconds = []
class AlwaysPlain(PlainStepPolicy):
    def plain_next(self):
        return True
    def record(self, plain, tokens, s, timed=True, chain_hit=False):
        if plain:
            seconds.append(s)

class Gaps(BaseStreamer):
    def __init__(self):
        self.times = []
    def put(self, value):
        self.times.append(time.perf_counter())
    def end(self):
        pass

target, tok = load_embedded_target(device="cpu")
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tok, int(sys.argv[1]), kind="prose", split="eval", seed=0)])
loop.PlainStepPolicy = AlwaysPlain
for rep in range(3):
    target.set_attn_implementation("sdpa")
    gaps = Gaps()
    ref = target.generate(ids, max_new_tokens=33, do_sample=False, cache_implementation="static", streamer=gaps)
    vanilla = statistics.median(b - a for a, b in zip(gaps.times[2:], gaps.times[3:]))
    seconds.clear()
    out = target.generate(ids, assistant_model=draft, max_new_tokens=33, do_sample=False, longspec_plain_steps=True)
    assert torch.equal(out, ref)
    print(f"rep {rep}: vanilla static step {vanilla * 1000:.1f} ms, plain step {statistics.median(seconds) * 1000:.1f} ms "
          f"({len(seconds)} steps)", flush=True)
