"""What trying only a node's first 8 draws (rejection.CHILDREN_TRIED, forty-fifth session) costs sampled calls in
tau. Each eval-split prompt is sampled twice with the same seed, at temperature 0.8 (decode_bench's sampled
setting), with the shipped draft's own GPU round (re-ranked leaves, no chain: a sampled call's default): once
trying a node's first 8 draws, once trying all of them. The walk's uniforms are drawn up front per node, so the
two calls take the same draws until one accepts a child past the eighth; the script counts those rounds too.

    OMP_NUM_THREADS=1 PYTHONPATH=src python docs/results/session45_2026-12-06/sampled_children_tried_tau.py \
        OUT.jsonl 2048 code,prose,chat 4 0,1

A study script of the forty-fifth session, not a benchmark."""
import json
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
import tau_curve  # noqa: E402
from hf_longspec.demo import load_draft_for  # noqa: E402
from hf_longspec.embedded import load_embedded_target  # noqa: E402
from hf_longspec.evaluation import own_round  # noqa: E402
from hf_longspec.generation import sampled_accept  # noqa: E402

CAPPED, ALL = sampled_accept.sample_accept.__defaults__[-1], 10**6


def main():
    out_path, lengths, kinds = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], sys.argv[3].split(",")
    prompts, seeds = int(sys.argv[4]), [int(x) for x in sys.argv[5].split(",")]
    target, tokenizer = load_embedded_target()
    draft, _ = load_draft_for(target, "embedded")
    defaults = sampled_accept.sample_accept.__defaults__
    for prompt in tau_curve.build_prompts(tokenizer, lengths, kinds, prompts):
        ids = torch.tensor([prompt["input_ids"]])
        for seed in seeds:
            record = {k: prompt[k] for k in ("length", "kind", "index")} | {"seed": seed}
            began, outputs = time.time(), {}
            for name, tried in (("first_8", CAPPED), ("all", ALL)):
                sampled_accept.sample_accept.__defaults__ = (*defaults[:-1], tried)
                torch.manual_seed(seed)
                out = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=96, do_sample=True,
                                      temperature=0.8, pad_token_id=tokenizer.eos_token_id, assistant_model=draft,
                                      **{**own_round(draft), "longspec_lookup_tokens": 0})
                assert draft.last_stats.rerank_leaves and not draft.last_stats.host_walked
                record[name] = draft.last_stats.tau
                outputs[name] = out[0, ids.shape[1]:].tolist()
            sampled_accept.sample_accept.__defaults__ = defaults
            record["same_tokens"] = outputs["first_8"] == outputs["all"]
            print(json.dumps(record), f"{time.time() - began:.0f}s", flush=True)
            with open(out_path, "a") as f:
                f.write(json.dumps(record) + "\n")


main()
