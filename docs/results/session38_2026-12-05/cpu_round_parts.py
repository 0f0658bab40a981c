"""Where a CPU round at 8k spends its time, by component (wall clock, summed over one generate call)."""
import sys, time, collections, functools
import torch
from hf_longspec.embedded import load_embedded_target
from hf_longspec.demo import load_draft_for
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.generation.decoder import LongSpecDecoder
from hf_longspec.modeling_longspec import LongSpecDraftModel

spent = collections.Counter(); calls = collections.Counter()
def timed(cls, name):
    original = getattr(cls, name)
    @functools.wraps(original)
    def wrapper(*a, **k):
        t = time.perf_counter(); out = original(*a, **k)
        spent[name] += time.perf_counter() - t; calls[name] += 1
        return out
    setattr(cls, name, wrapper)
for cls, name in [(LongSpecDecoder, "_verify_forward"), (LongSpecDecoder, "_draft_greedy_eager"), (LongSpecDecoder, "round"),
                  (LongSpecDraftModel, "_logits"), (LongSpecDraftModel, "decode_step")]:
    timed(cls, name)
target, tok = load_embedded_target()
draft, _ = load_draft_for(target, "embedded")
length = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
kind = sys.argv[2] if len(sys.argv) > 2 else "prose"
ids = torch.tensor([long_prompt_ids(tok, length, kind=kind, split="eval", seed=0)])
for trees in [None, (1, 1, 1)]:
  for lookup in [None, 0]:
    if trees is None and lookup == 0: continue
    kw = {} if trees is None else {"longspec_tree_widths": trees}
    if lookup is not None: kw["longspec_lookup_tokens"] = lookup
    target.generate(ids, assistant_model=draft, max_new_tokens=8, do_sample=False, **kw)
    spent.clear(); calls.clear()
    t = time.perf_counter()
    target.generate(ids, assistant_model=draft, max_new_tokens=48, do_sample=False, **kw)
    wall = time.perf_counter() - t
    s = draft.last_stats
    print(f"{kw} wall {wall:.2f}s rounds {s.rounds} tau {s.tau:.2f} tree {s.tree_widths} lookup {s.lookup_tokens}")
    for name in spent:
        print(f"  {name:22s} {1000*spent[name]/max(calls['round'],1):7.1f} ms/round  ({calls[name]} calls)")
t = time.perf_counter()
target.generate(ids, max_new_tokens=48, do_sample=False, cache_implementation="static")
print("vanilla static 48 tokens (prefill included)", time.perf_counter() - t)
