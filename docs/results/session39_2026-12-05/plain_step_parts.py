"""PYTHONPATH=src python docs/results/session39_2026-12-05/plain_step_parts.py 8000

Where a plain step's time goes at 8k on the CPU: lookup propose, target forward, commit (wall clock, medians)."""
import statistics, sys, time
import torch
from hf_longspec.embedded import load_embedded_target
from hf_longspec.demo import load_draft_for
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.generation import loop
from hf_longspec.generation.decoder import LongSpecDecoder
from hf_longspec.generation.plain_steps import PlainStepPolicy

parts = {}
def clock(name, fn):
    t = time.perf_counter(); out = fn(); parts.setdefault(name, []).append(time.perf_counter() - t); return out

def plain_step(self):
    self.tree.tokens[:, 0] = self.root_tokens
    self.tree.ancestors[:, 0, 0] = True
    guessed = clock("lookup propose", lambda: self.lookup.propose(self.cache.lengths, self.root_tokens))
    logits = clock("target forward (1 row)", lambda: self._verify_forward(nodes=1))[:, 0].float()
    following = logits.argmax(-1)
    one = torch.ones_like(self.cache.lengths)
    clock("commit (cache, ring, lookup)", lambda: self._commit(torch.zeros_like(self.result[:, :1]), one, following))
    self.result[:, 0] = one; self.result[:, 1] = 0; self.result[:, 2] = following

class AlwaysPlain(PlainStepPolicy):
    def plain_next(self):
        return True

LongSpecDecoder.plain_step = plain_step
loop.PlainStepPolicy = AlwaysPlain
target, tok = load_embedded_target(device="cpu")
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tok, int(sys.argv[1]), kind="prose", split="eval", seed=0)])
target.generate(ids, assistant_model=draft, max_new_tokens=33, do_sample=False, longspec_plain_steps=True)
for name, values in parts.items():
    print(f"{name}: {statistics.median(values) * 1000:.2f} ms", flush=True)
# the same forward through transformers' own sdpa over a DynamicCache of the prompt (what vanilla's step runs)
from transformers import DynamicCache
target.set_attn_implementation("sdpa")
cache = DynamicCache(config=target.config)
with torch.no_grad():
    out = target(ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
    token = out.logits[:, -1].argmax(-1, keepdim=True)
    times = []
    for step in range(16):
        t = time.perf_counter()
        out = target(token, past_key_values=cache, use_cache=True)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        times.append(time.perf_counter() - t)
print(f"sdpa forward over a DynamicCache (1 row): {statistics.median(times) * 1000:.2f} ms")
