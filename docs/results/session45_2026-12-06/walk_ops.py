"""Aten ops of one sampled device walk and one greedy accept, for the shipped layout (4-16-16-16-16, re-ranked
leaves; greedy also with the 32-token chain), batch 1, vocabulary 49,152, on the CPU: in a CUDA graph each op is a
kernel launch or more, until torch.compile fuses some (on CUDA the walk compiles its tries, not the rest). Output of
the forty-fifth session (after the first-8-draws cap): walk_ops_cpu.txt.

    PYTHONPATH=src python docs/results/session45_2026-12-06/walk_ops.py

A study script, not a benchmark."""
import torch
from torch.profiler import profile, ProfilerActivity
from hf_longspec.generation.draft_tree import TreeLayout, TreeBuffers
from hf_longspec.generation.sampled_accept import sample_accept
from hf_longspec.generation.acceptance import greedy_accept

V = 49152
def tree_for(layout):
    t = TreeBuffers.allocate(layout, 1, "cpu", V, keep_probs=True)
    n = layout.num_nodes
    t.tokens.copy_(torch.randint(0, V, (1, n)))
    par = torch.zeros(1, n, dtype=torch.long)
    off = layout.offsets
    for d, w in enumerate(layout.widths, start=1):
        prev = slice(off[d - 1], off[d - 1] + (1 if d == 1 else layout.widths[d - 2]))
        par[0, off[d]:off[d] + w] = torch.arange(prev.start, prev.stop).repeat_interleave(-(-w // (prev.stop - prev.start)))[:w]
    t.parents.copy_(par); t.valid.fill_(True)
    t.draft_probs.copy_(torch.softmax(torch.randn(1, layout.num_run, V), -1))
    return t
for name, layout, fn in (("sampled, no chain", TreeLayout((4, 16, 16, 16, 16), rerank_leaves=True), sample_accept),
                         ("greedy, 32-token chain", TreeLayout((4, 16, 16, 16, 16), rerank_leaves=True).with_lookup(32), greedy_accept)):
    tree = tree_for(layout)
    scores = torch.randn(1, layout.num_nodes, V)
    fn(layout, tree, scores)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        fn(layout, tree, scores)
    events = [e for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]
    print(name, "top-level aten ops:", len(events))
from hf_longspec.generation import sampled_accept as sa
layout = TreeLayout((4, 16, 16, 16, 16), rerank_leaves=True); tree = tree_for(layout); scores = torch.randn(1, layout.num_nodes, V)
def inert(p, q, tokens, parents, valid, node, offered, uniforms):
    return p, torch.zeros_like(node), torch.zeros_like(offered)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    sa.sample_accept(layout, tree, scores, inert)
print("sampled walk without its tries: top-level aten ops", len([e for e in prof.events() if e.name.startswith("aten::") and e.cpu_parent is None]))
