"""How far down a node's draws a sampled round's accepted child sits (CPU, float32, the GPU's tree with re-ranked
leaves, temperature 0.8, decode_bench's prompts at LENGTH: 3 code, 3 prose; 96 new tokens), trying every draw as
the walk did before rejection.CHILDREN_TRIED (forty-fifth session; output: sampled_accepted_rank_cpu.txt, run on the
code before the cap).

    OMP_NUM_THREADS=2 PYTHONPATH=src python docs/results/session45_2026-12-06/sampled_accepted_rank.py 2048 3

A study script, not a benchmark."""
import collections, json, sys, torch
from hf_longspec.generation import sampled_accept
from hf_longspec.embedded import load_embedded_target, load_embedded_draft
from hf_longspec.bench.workloads import build_workloads

sampled_accept.sample_accept.__defaults__ = (*sampled_accept.sample_accept.__defaults__[:-1], 10**6)  # every draw
hist = collections.Counter(); kids = collections.Counter()
orig = sampled_accept._try_children
def spy(p, q, tokens, parents, valid, node, offered, uniforms):
    cand_all = offered[:, None] & valid & (parents == node[:, None])
    p2, token, taken = orig(p, q, tokens, parents, valid, node, offered, uniforms)
    for b in range(tokens.shape[0]):
        if not offered[b]:
            continue
        n = int(cand_all[b].sum()); kids[n] += 1
        if taken[b]:
            pos = (cand_all[b] & (tokens[b] == token[b])).int().argmax()
            hist[int(cand_all[b, :pos].sum()) + 1] += 1
        else:
            hist[0] += 1
    return p2, token, taken
sampled_accept._try_children = spy
target, tok = load_embedded_target(device="cpu", dtype=torch.float32)
draft = load_embedded_draft(target)
length, prompts = int(sys.argv[1]), int(sys.argv[2])
wl = build_workloads(tok, [length], ["code", "prose"], prompts, seed=0)
for i, w in enumerate(wl):
    torch.manual_seed(i)
    ids = torch.tensor([w.input_ids])
    target.generate(ids, assistant_model=draft, max_new_tokens=96, do_sample=True, temperature=0.8,
                    longspec_rerank_leaves=True, longspec_plain_steps=False, longspec_tree_widths=[4, 16, 16, 16, 16])
    print(w.name, draft.last_stats.tau, dict(sorted(hist.items())), flush=True)
print("accepted rank (0 = none):", dict(sorted(hist.items())))
print("children offered:", dict(sorted(kids.items())))
