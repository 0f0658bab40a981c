"""Does re-ranking the tree's leaves (on in the shipped config since the forty-fourth session) change sampled
calls' tau? Each eval-split prompt is sampled with and without it, the same seed for both calls, at temperature
0.8 (decode_bench's sampled setting), with the shipped draft's own tree and no chain (a sampled call's default).
Paired per (prompt, seed); the two calls' draws differ once their trees differ, so a pair compares two samples.

    OMP_NUM_THREADS=1 PYTHONPATH=src python docs/results/session44_2026-12-06/sampled_rerank_tau.py OUT.jsonl \
        2048 code,prose,chat 4 0,1

A study script of the forty-fourth session, not a benchmark."""
import json
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
import tau_curve  # noqa: E402
from hf_longspec.demo import load_draft_for  # noqa: E402
from hf_longspec.embedded import load_embedded_target  # noqa: E402
from hf_longspec.evaluation import own_round  # noqa: E402


def main():
    out_path, lengths, kinds = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], sys.argv[3].split(",")
    prompts, seeds = int(sys.argv[4]), [int(x) for x in sys.argv[5].split(",")]
    target, tokenizer = load_embedded_target()
    draft, _ = load_draft_for(target, "embedded")
    for prompt in tau_curve.build_prompts(tokenizer, lengths, kinds, prompts):
        ids = torch.tensor([prompt["input_ids"]])
        for seed in seeds:
            record = {k: prompt[k] for k in ("length", "kind", "index")} | {"seed": seed}
            began = time.time()
            for rerank in (False, True):
                torch.manual_seed(seed)
                target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=96, do_sample=True,
                                temperature=0.8, pad_token_id=tokenizer.eos_token_id, assistant_model=draft,
                                **{**own_round(draft), "longspec_lookup_tokens": 0,
                                   "longspec_rerank_leaves": rerank})
                assert draft.last_stats.rerank_leaves is rerank
                record["rerank" if rerank else "leaves_of_last_depth"] = draft.last_stats.tau
            print(json.dumps(record), f"{time.time() - began:.0f}s", flush=True)
            with open(out_path, "a") as f:
                f.write(json.dumps(record) + "\n")


main()
