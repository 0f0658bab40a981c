"""PYTHONPATH=src python docs/results/session40_2026-12-05/plain_step_attention_ab.py 8000 [REPEATS]

A plain step's attention, one SDPA call over the filled cache outside the custom op
(`hybrid._root_alone_attention`, fortieth session) against the custom op's prefix + tree + merge it replaced,
beside a vanilla static step, interleaved in one process: median wall time per step over 32 steps of 8k prose,
float32, this CPU. Every output equals vanilla's."""
import statistics, sys
from pathlib import Path

import torch
from hf_longspec.attention import hybrid
from hf_longspec.corpus import long_prompt_ids
from hf_longspec.demo import load_draft_for
from hf_longspec.embedded import load_embedded_target
from hf_longspec.generation import loop

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from plain_step_timing import AlwaysPlain, TokenStamps, plain_step_seconds  # noqa: E402


def prefix_tree_merge(query, key_buffer, value_buffer, prefix_lengths, scale):
    """What a plain step's attention was before: the custom op's prefix + tree + merge, for a one-node tree."""
    mask = torch.ones(query.shape[0], 1, 1, dtype=torch.bool, device=query.device)
    return hybrid.cached_tree_attention(query, key_buffer, value_buffer, mask, prefix_lengths, scale)


target, tok = load_embedded_target(device="cpu")
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tok, int(sys.argv[1]), kind="prose", split="eval", seed=0)])
loop.PlainStepPolicy = AlwaysPlain
sdpa_root = hybrid._root_alone_attention
rows = {"vanilla static": [], "plain, one SDPA call": [], "plain, prefix + tree + merge": []}
for rep in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
    gaps = TokenStamps()
    ref = target.generate(ids, max_new_tokens=33, do_sample=False, cache_implementation="static", streamer=gaps)
    rows["vanilla static"].append(statistics.median(b - a for a, b in zip(gaps.times[2:], gaps.times[3:])))
    for name, path in (("plain, one SDPA call", sdpa_root), ("plain, prefix + tree + merge", prefix_tree_merge)):
        hybrid._root_alone_attention = path
        plain_step_seconds.clear()
        out = target.generate(ids, assistant_model=draft, max_new_tokens=33, do_sample=False, longspec_plain_steps=True)
        assert torch.equal(out, ref), name
        rows[name].append(statistics.median(plain_step_seconds))
    print(f"rep {rep}: " + ", ".join(f"{name} {times[-1] * 1000:.1f} ms" for name, times in rows.items()), flush=True)
vanilla = rows["vanilla static"]
for name, times in rows.items():
    ratios = [t / v for t, v in zip(times, vanilla)]
    print(f"{name}: median {statistics.median(times) * 1000:.1f} ms, per rep / vanilla {min(ratios):.3f}-{max(ratios):.3f}")
