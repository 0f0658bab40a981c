"""Offline estimate: would choosing ALL verified rows by score (EAGLE-2's re-ranking of the whole tree, not only
its leaves) raise tau at the same 69 rows?

The shipped tree (since the forty-fourth session) verifies every node the draft runs (53, root included) and the
16 best other candidates of those nodes (re-ranked leaves). EAGLE-2 verifies the best nodes of all it scored: a
weak run node deep in the beam gives its row to a strong second guess near the root. Scores fall along a path
(log q <= 0), so the best M of (run nodes and their candidates) are closed under ancestors: a valid tree.
This replay records each round's run nodes and their top-32 candidates during a normal greedy call of the
shipped draft alone (its own tree, re-ranked leaves), then walks the variants against the call's own output
(greedy output does not depend on the tree; later rounds are held fixed, so a variant's gain is undercounted).

    OMP_NUM_THREADS=1 PYTHONPATH=src python docs/results/session44_2026-12-06/tree_full_rerank_replay.py OUT.jsonl \
        2048,4096,8000 code,prose,chat 2

Per prompt: "tau" as generate measured it; "leaves16" the replayed shipped tree (its rounds' lengths, but for
a last round cut by max_new_tokens); "allM" the best M - 1 nodes of all scored, beside the root. A study script
of the forty-fourth session, not a benchmark: it patches TreeDrafter to record each round."""
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

ROUNDS, POOL = [], 32
build_tree, log_probs_of = draft_tree.TreeDrafter.build, draft_tree.TreeDrafter._log_probs


def recording_log_probs(self, logits, history, path_tokens):
    out = log_probs_of(self, logits, history, path_tokens)
    self.recorded.append(out[0].topk(POOL, dim=-1))
    return out


def recording_build(self, context, root_tokens, root_positions, sequences=None):
    self.recorded = []
    build_tree(self, context, root_tokens, root_positions, sequences)
    layout, tree = self.layout, self.buffers
    rows = 1 + sum(layout.widths)
    ROUNDS.append(dict(position=int(root_positions[0]), tokens=tree.tokens[0, :rows].tolist(),
                       parents=tree.parents[0, :rows].tolist(), num_run=layout.num_run,
                       candidates=torch.cat([r.indices for r in self.recorded]).tolist(),
                       log_q=torch.cat([r.values for r in self.recorded]).tolist()))


draft_tree.TreeDrafter.build, draft_tree.TreeDrafter._log_probs = recording_build, recording_log_probs


def walk(children, continuation):
    """Tokens a tree accepts: children maps node -> {token: (child, expanded)}; a node the draft did not run
    (expanded False) ends the path."""
    node, depth = 0, 0
    while depth < len(continuation) and (hit := children.get(node, {}).get(continuation[depth])):
        depth += 1
        node, expanded = hit
        if not expanded:
            break
    return depth


def variants(round_, continuation, rows_kept=(69, 77)):
    run, tokens, parents = round_["num_run"], round_["tokens"], round_["parents"]
    score = [0.0] * run  # cumulative log q of each run node, from its parent's candidates
    scored = []  # (score, parent, token, run node id or None) for every candidate of every run node
    run_child = {(parents[c], tokens[c]): c for c in range(1, run)}
    for p in range(run):  # parents precede children in node order
        for token, lq in zip(round_["candidates"][p], round_["log_q"][p]):
            child = run_child.get((p, token))
            if child is not None:
                score[child] = score[p] + lq
            scored.append((score[p] + lq, p, token, child))
    out = {}
    shipped = {}
    for c in range(1, len(tokens)):
        shipped.setdefault(parents[c], {})[tokens[c]] = (c, c < run)
    out["leaves16"] = walk(shipped, continuation)
    scored.sort(key=lambda s: -s[0])
    for rows in rows_kept:
        chosen, kept = {}, {0}
        for s, p, token, child in scored:
            if len(kept) == rows:
                break
            if p in kept:  # ancestor-closed by construction; the check guards ties
                key = child if child is not None else ("leaf", p, token)
                kept.add(key)
                chosen.setdefault(p, {})[token] = (child, child is not None)
        out[f"all{rows}"] = walk(chosen, continuation)
    return out


def main():
    out_path, lengths, kinds, prompts = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], sys.argv[3].split(","), int(sys.argv[4])
    target, tokenizer = load_embedded_target()
    draft, _ = load_draft_for(target, "embedded")
    for prompt in tau_curve.build_prompts(tokenizer, lengths, kinds, prompts):
        ROUNDS.clear()
        ids = torch.tensor([prompt["input_ids"]])
        began = time.time()
        out = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=128, do_sample=False,
                              pad_token_id=tokenizer.eos_token_id, assistant_model=draft,
                              **{**own_round(draft), "longspec_lookup_tokens": 0})
        text = prompt["input_ids"] + out[0, ids.shape[1]:].tolist()
        per_round = []
        for round_ in ROUNDS:
            assert text[round_["position"]] == round_["tokens"][0]
            per_round.append(variants(round_, text[round_["position"] + 1:]))
        record = {k: prompt[k] for k in ("length", "kind", "index")}
        record.update(tau=draft.last_stats.tau, rerank_leaves=draft.last_stats.rerank_leaves, rounds=len(per_round),
                      replay_matches=[v["leaves16"] + 1 for v in per_round][:-1] ==
                      list(draft.last_stats.round_lengths.get(0, []))[:len(per_round) - 1])
        for key in per_round[0]:
            record[key] = sum(v[key] + 1 for v in per_round) / len(per_round)
        print(json.dumps(record), f"{time.time() - began:.0f}s", flush=True)
        with open(out_path, "a") as f:
            f.write(json.dumps(record) + "\n")


main()
