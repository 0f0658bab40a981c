"""Where a CPU round at 8k spends its time: torch.profiler over one speculative generate (the CPU round, 40 tokens)."""
import torch, time
from torch.profiler import profile, ProfilerActivity
from hf_longspec.embedded import load_embedded_target
from hf_longspec.demo import load_draft_for
from hf_longspec.corpus import long_prompt_ids
target, tok = load_embedded_target()
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tok, 8000, kind="prose", split="eval", seed=0)])
from transformers import DynamicCache
target.generate(ids, assistant_model=draft, max_new_tokens=8, do_sample=False)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    t=time.perf_counter()
    out = target.generate(ids, assistant_model=draft, max_new_tokens=40, do_sample=False)
    print("wall", time.perf_counter()-t, draft.last_stats.as_dict()["rounds"], draft.last_stats.tau)
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
