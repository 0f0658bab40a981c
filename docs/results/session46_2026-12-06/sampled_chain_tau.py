"""Whether a lookup chain raises a sampled call's tau: each eval-split prompt is sampled twice with the same seed at
temperature 0.8 (decode_bench's sampled setting), with the shipped draft's own GPU round (re-ranked leaves): once
with no chain (a sampled call's default), once with the draft config's 32-token chain (`longspec_lookup_tokens=32`).
The chain's uniforms are drawn beside the draft's, so the two calls' draws differ: pairs are by prompt and seed.

    OMP_NUM_THREADS=2 PYTHONPATH=src python docs/results/session46_2026-12-06/sampled_chain_tau.py \
        OUT.jsonl 2048 code,prose,chat 4 0,1

A study script of the forty-sixth session, not a benchmark."""
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
            for name, chain in (("no_chain", 0), ("chain_32", 32)):
                torch.manual_seed(seed)
                target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=96, do_sample=True,
                                temperature=0.8, pad_token_id=tokenizer.eos_token_id, assistant_model=draft,
                                **{**own_round(draft), "longspec_lookup_tokens": chain})
                stats = draft.last_stats
                assert stats.rerank_leaves and not stats.host_walked and stats.lookup_tokens == chain
                record[name] = stats.tau
                record[name + "_lookup_commits"] = stats.lookup_commits
            print(json.dumps(record), f"{time.time() - began:.0f}s", flush=True)
            with open(out_path, "a") as f:
                f.write(json.dumps(record) + "\n")


main()
