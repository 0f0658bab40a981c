"""Speculative generate with the embedded target and the shipped draft, checked against vanilla.

    python examples/quickstart.py
"""

import torch

from hf_longspec import load_embedded_draft, load_embedded_target
from hf_longspec.corpus import long_prompt_ids

target, tokenizer = load_embedded_target()
draft = load_embedded_draft(target)
ids = torch.tensor([long_prompt_ids(tokenizer, 2000, kind="code")], device=target.device)

greedy = target.generate(ids, assistant_model=draft, max_new_tokens=64, do_sample=False)
print(tokenizer.decode(greedy[0, ids.shape[1]:]))
print("tau:", round(draft.last_stats.tau, 2), "identical to vanilla:",
      torch.equal(greedy, target.generate(ids, max_new_tokens=64, do_sample=False)))

# sampling keeps the target's distribution (temperature, top-k, top-p apply to target and draft alike)
sampled = target.generate(ids, assistant_model=draft, max_new_tokens=64, do_sample=True, temperature=0.7, top_p=0.9)
print(tokenizer.decode(sampled[0, ids.shape[1]:]))

# a smaller tree, e.g. for a CPU: nodes per depth
target.generate(ids, assistant_model=draft, max_new_tokens=32, longspec_tree_widths=[2, 4, 4])
print("tau with tree 2-4-4:", round(draft.last_stats.tau, 2))
