"""Vanilla greedy generate (no assistant) on 6 of the forty-seventh session's CPU prompts (non-English at 2048 and 8000
tokens, indices 0 and 1; the essay at 2048 and 8000, index 1), compared token for token with the LongSpec tokens its
tau_curve runs stored.

    OMP_NUM_THREADS=2 PYTHONPATH=src python docs/results/session47_2026-12-06/vanilla_check.py OUT.json \
        docs/results/session47_2026-12-06/multi_cpu128_lookup0.json docs/results/session47_2026-12-06/essay_cpu128_lookup0.json

The essay is /tmp/tpj13.txt, made as docs/training.md's thirtieth session says. Each prompt is rebuilt here and must
have the digest its run recorded."""
import json, sys, time
import torch
sys.path.insert(0, "src"); sys.path.insert(0, "benchmarks")
import tau_curve
from hf_longspec.embedded import load_embedded_target
from hf_longspec.evaluation import prompt_digest
target, tok = load_embedded_target()
stored = {}
for path in sys.argv[2:]:
    for r in json.load(open(path))["runs"]:
        stored[(r["length"], r["kind"], r["index"])] = (r["prompt_digest"], r["tokens"])
picks = [(L, "multilingual", i) for L in (2048, 8000) for i in (0, 1)] + [(L, "essay", 1) for L in (2048, 8000)]
built = tau_curve.build_prompts(tok, [2048, 4096, 8000], ["multilingual"], 6)
built += tau_curve.build_prompts(tok, [2048, 4096, 8000], [], 3, text_files={"essay": "/tmp/tpj13.txt"})
prompts = {(p["length"], p["kind"], p["index"]): p for p in built}
out = []
for key in picks:
    p = prompts[key]; digest, tokens = stored[key]
    assert prompt_digest(p["input_ids"]) == digest, key
    ids = torch.tensor([p["input_ids"]])
    t0 = time.time()
    v = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=len(tokens), do_sample=False,
                        pad_token_id=tok.eos_token_id)
    same = v[0, ids.shape[1]:].tolist() == tokens
    out.append({"length": key[0], "kind": key[1], "index": key[2], "identical": same, "tokens": len(tokens)})
    print(key, same, f"{time.time() - t0:.0f}s", flush=True)
json.dump(out, open(sys.argv[1], "w"))
print(sum(o["identical"] for o in out), "of", len(out), "identical")
