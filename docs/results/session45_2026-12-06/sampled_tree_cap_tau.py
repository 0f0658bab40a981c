"""Does giving a sampled node at most CHILDREN_TRIED (8) children when the tree is chosen (forty-fifth session) raise
sampled tau? Before, the tree could give a node more children than the walk tries: rows verified and never used.
Each eval-split prompt is sampled twice with the same seed, at temperature 0.8, with the shipped draft's own GPU round
(re-ranked leaves, no chain: a sampled call's default), the walk trying a node's first 8 draws both times: once with
the tree capped likewise, once without (draft_tree.CHILDREN_TRIED set past any width). The trees differ, so the draws
differ from the first round on: a pair compares two samples.

    git apply docs/results/session45_2026-12-06/sampled_tree_cap.patch    # the cap, tried and not landed
    OMP_NUM_THREADS=1 PYTHONPATH=src python docs/results/session45_2026-12-06/sampled_tree_cap_tau.py OUT.jsonl \
        2048 code,prose,chat 4 0,1          # and: ... 8000 code,prose,chat 2 0

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
from hf_longspec.generation import draft_tree  # noqa: E402

CAPPED = draft_tree.CHILDREN_TRIED


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
            for name, limit in (("tree_capped", CAPPED), ("tree_uncapped", 10**6)):
                draft_tree.CHILDREN_TRIED = limit
                torch.manual_seed(seed)
                target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=96, do_sample=True,
                                temperature=0.8, pad_token_id=tokenizer.eos_token_id, assistant_model=draft,
                                **{**own_round(draft), "longspec_lookup_tokens": 0})
                assert draft.last_stats.rerank_leaves and not draft.last_stats.host_walked
                record[name] = draft.last_stats.tau
            draft_tree.CHILDREN_TRIED = CAPPED
            print(json.dumps(record), f"{time.time() - began:.0f}s", flush=True)
            with open(out_path, "a") as f:
                f.write(json.dumps(record) + "\n")


main()
