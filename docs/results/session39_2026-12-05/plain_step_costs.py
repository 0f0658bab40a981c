"""PYTHONPATH=src python docs/results/session39_2026-12-05/plain_step_costs.py 8000

Median wall time of a plain step (generate with every step plain) against a vanilla static step, 8k prose, CPU."""
import statistics, sys
from pathlib import Path

import torch
from hf_longspec.embedded import load_embedded_target
from hf_longspec.demo import load_draft_for
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.generation import loop

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from plain_step_timing import AlwaysPlain, TokenStamps, plain_step_seconds  # noqa: E402

target, tok = load_embedded_target(device="cpu")
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tok, int(sys.argv[1]), kind="prose", split="eval", seed=0)])
loop.PlainStepPolicy = AlwaysPlain
for rep in range(3):
    target.set_attn_implementation("sdpa")
    gaps = TokenStamps()
    ref = target.generate(ids, max_new_tokens=33, do_sample=False, cache_implementation="static", streamer=gaps)
    vanilla = statistics.median(b - a for a, b in zip(gaps.times[2:], gaps.times[3:]))
    plain_step_seconds.clear()
    out = target.generate(ids, assistant_model=draft, max_new_tokens=33, do_sample=False, longspec_plain_steps=True)
    assert torch.equal(out, ref)
    print(f"rep {rep}: vanilla static step {vanilla * 1000:.1f} ms, plain step {statistics.median(plain_step_seconds) * 1000:.1f} ms "
          f"({len(plain_step_seconds)} steps)", flush=True)
