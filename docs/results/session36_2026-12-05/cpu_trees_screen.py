import time, torch, json, sys
from hf_longspec.demo import load_draft_for, timed
from hf_longspec.embedded import load_embedded_target
from hf_longspec.corpus import long_prompt_ids
target, tok = load_embedded_target()
draft, _ = load_draft_for(target, "embedded")
dev = target.device
results = []
for kind, seed in (("code", 0), ("prose", 0)):
    ids = torch.tensor([long_prompt_ids(tok, 4000, kind=kind, split="eval", seed=seed)])
    target.generate(ids[:, :64], max_new_tokens=4, do_sample=False)
    _, prefill = timed(lambda: target.generate(ids, max_new_tokens=1, do_sample=False), dev)
    ref, vs = timed(lambda: target.generate(ids, max_new_tokens=128, do_sample=False), dev)
    van = 127 / (vs - prefill)
    print(kind, f"prefill {prefill:.2f} vanilla {van:.2f} tok/s", flush=True)
    for widths, lookup in (((4, 16, 16, 16, 16), 32), ((2, 2, 2, 2), 16), ((1, 1, 1, 1), 16), ((2, 4, 4, 4), 16), ((4, 16, 16, 16, 16), 0), ((2, 2, 2, 2), 0)):
        target.generate(ids[:, :64], max_new_tokens=8, do_sample=False, assistant_model=draft, longspec_tree_widths=list(widths), longspec_lookup_tokens=lookup)
        out, s = timed(lambda: target.generate(ids, max_new_tokens=128, do_sample=False, assistant_model=draft,
                                               longspec_tree_widths=list(widths), longspec_lookup_tokens=lookup), dev)
        st = draft.last_stats.as_dict()
        rate = 127 / (s - prefill)
        row = dict(kind=kind, widths=widths, lookup=lookup, tau=round(st["tau"], 2), rounds=st["rounds"],
                   tok_s=round(rate, 2), speedup=round(rate / van, 2), identical=bool(torch.equal(out, ref)))
        results.append(row); print(row, flush=True)
json.dump(results, open(sys.argv[1], "w"), indent=1)
