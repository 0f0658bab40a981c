"""PYTHONPATH=src python docs/results/session39_2026-12-05/plain_step_parts.py 8000

Where a plain step's time goes at 8k on the CPU: lookup propose, target forward, commit (wall clock, medians).
The decoder's own methods are wrapped with a clock; the plain step itself runs unchanged."""
import functools, statistics, sys, time
import torch
from hf_longspec.embedded import load_embedded_target
from hf_longspec.demo import load_draft_for
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.generation import loop
from hf_longspec.generation.decoder import LongSpecDecoder
from hf_longspec.generation.lookup import PromptLookup
from hf_longspec.generation.plain_steps import PlainStepPolicy

parts = {}
def clocked(name, method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        begin = time.perf_counter()
        out = method(*args, **kwargs)
        parts.setdefault(name, []).append(time.perf_counter() - begin)
        return out
    return wrapper

class AlwaysPlain(PlainStepPolicy):
    def plain_next(self):
        return True

PromptLookup.propose = clocked("lookup propose", PromptLookup.propose)
LongSpecDecoder._verify_forward = clocked("target forward (1 row)", LongSpecDecoder._verify_forward)
LongSpecDecoder._commit = clocked("commit (cache, ring, lookup)", LongSpecDecoder._commit)
LongSpecDecoder.plain_step = clocked("whole plain step", LongSpecDecoder.plain_step)
loop.PlainStepPolicy = AlwaysPlain
target, tok = load_embedded_target(device="cpu")
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tok, int(sys.argv[1]), kind="prose", split="eval", seed=0)])
target.generate(ids, assistant_model=draft, max_new_tokens=33, do_sample=False, longspec_plain_steps=True)
for name, values in parts.items():
    print(f"{name}: {statistics.median(values) * 1000:.2f} ms ({len(values)} calls)", flush=True)
# the same forward through transformers' own sdpa over a DynamicCache of the prompt (what vanilla's step runs)
from transformers import DynamicCache
target.set_attn_implementation("sdpa")
cache = DynamicCache(config=target.config)
with torch.no_grad():
    out = target(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    token = out.logits[:, -1].argmax(-1, keepdim=True)
    times = []
    for step in range(16):
        begin = time.perf_counter()
        out = target(token, past_key_values=cache, use_cache=True)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        times.append(time.perf_counter() - begin)
print(f"sdpa forward over a DynamicCache (1 row): {statistics.median(times) * 1000:.2f} ms")
