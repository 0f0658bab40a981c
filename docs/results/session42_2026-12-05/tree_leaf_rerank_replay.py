"""Offline estimate: would re-ranking the tree's leaves (top-L of every run node's candidates by cumulative
score, instead of only the last depth's children) raise tau at the same verified-node count?
Records each round's run nodes and their top-32 candidates during a normal greedy LongSpec run, then replays
the tree variants against the run's own output (greedy output does not depend on the tree).

    OMP_NUM_THREADS=1 python docs/results/session42_2026-12-05/tree_leaf_rerank_replay.py OUT.jsonl 2048 code,prose,chat 2
    (run from the repository root; LENGTHS, KINDS, PROMPTS as tau_curve.py builds them, suffix-aligned;
    REPLAY_DEVICE=cuda: the target in bf16 on the GPU, rounds eager, so that every build is recorded)

Per prompt: "tau" as generate measured it, "tree" the replayed shipped tree (equal to it but for a last round
cut by max_new_tokens: "sim_matches_actual" compares the rounds' lengths), "rerankL" the same run nodes with
the L best leaves of all their top-32 candidates. A study script of the forty-second session, not a benchmark:
it patches TreeDrafter to record each round."""
import json
import os
import sys
import time

import torch

sys.path.insert(0, "src")
sys.path.insert(0, "benchmarks")
import tau_curve  # noqa: E402
from hf_longspec.demo import load_draft_for  # noqa: E402
from hf_longspec.embedded import load_embedded_target  # noqa: E402
from hf_longspec.evaluation import own_round  # noqa: E402
from hf_longspec.generation import draft_tree  # noqa: E402

ROUNDS = []
_orig_build, _orig_log_probs = draft_tree.TreeDrafter.build, draft_tree.TreeDrafter._log_probs
POOL_K = 32


def log_probs(self, logits, history, path_tokens):
    out = _orig_log_probs(self, logits, history, path_tokens)
    self._captured.append(out[0].topk(POOL_K, dim=-1))
    return out


def build(self, context, root_tokens, root_positions, sequences=None):
    self._captured = []
    _orig_build(self, context, root_tokens, root_positions, sequences)
    tree, layout = self.buffers, self.layout
    n = 1 + sum(layout.widths)
    top_lq = torch.cat([c.values for c in self._captured])  # (num_run, K)
    top_tok = torch.cat([c.indices for c in self._captured])
    ROUNDS.append(dict(pos=int(root_positions[0]), tokens=tree.tokens[0, :n].tolist(),
                       parents=tree.parents[0, :n].tolist(), scores=tree.scores[0, :n].tolist(),
                       num_run=layout.num_run, cand_tok=top_tok.tolist(), cand_lq=top_lq.tolist()))


draft_tree.TreeDrafter.build = build
draft_tree.TreeDrafter._log_probs = log_probs


def accepted(nodes_children, tokens, cont):
    """nodes_children: node -> {token: (child, is_run)}; walk the continuation."""
    node, depth = 0, 0
    while depth < len(cont):
        hit = nodes_children.get(node, {}).get(cont[depth])
        if hit is None:
            break
        depth += 1
        node, is_run = hit
        if not is_run:
            break
    return depth


def variants(r, cont, leaf_counts):
    run = r["num_run"]
    kids = {}
    for c in range(1, run):
        kids.setdefault(r["parents"][c], {})[r["tokens"][c]] = (c, True)
    out = {}
    # the shipped tree: its own leaves
    orig = {k: dict(v) for k, v in kids.items()}
    for c in range(run, len(r["tokens"])):
        orig.setdefault(r["parents"][c], {})[r["tokens"][c]] = (c, False)
    out["tree"] = accepted(orig, r["tokens"], cont)
    pool = []
    for p in range(run):
        taken = kids.get(p, {})
        for t, lq in zip(r["cand_tok"][p], r["cand_lq"][p]):
            if t not in taken:
                pool.append((r["scores"][p] + lq, p, t))
    pool.sort(reverse=True)
    for L in leaf_counts:
        tree = {k: dict(v) for k, v in kids.items()}
        for _, p, t in pool[:L]:
            tree.setdefault(p, {})[t] = (-1, False)
        out[f"rerank{L}"] = accepted(tree, r["tokens"], cont)
    return out


def main():
    out_path, lengths, kinds, prompts = sys.argv[1], [int(x) for x in sys.argv[2].split(",")], sys.argv[3].split(","), int(sys.argv[4])
    cuda = os.environ.get("REPLAY_DEVICE") == "cuda"  # bf16 on the GPU, rounds eager so that every build is seen
    target, tokenizer = load_embedded_target(device="cuda" if cuda else None, dtype=torch.bfloat16 if cuda else None)
    on_gpu = {"longspec_cuda_graphs": False, "longspec_compile": False} if cuda else {}
    draft, _ = load_draft_for(target, "embedded")
    ps = tau_curve.build_prompts(tokenizer, lengths, kinds, prompts)
    results = []
    for prompt in ps:
        ROUNDS.clear()
        ids = torch.tensor([prompt["input_ids"]], device=target.device)
        t0 = time.time()
        out = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=128, do_sample=False,
                              pad_token_id=tokenizer.eos_token_id, assistant_model=draft,
                              **{**own_round(draft), 'longspec_lookup_tokens': 0}, **on_gpu)
        full = prompt["input_ids"] + out[0, ids.shape[1]:].tolist()
        end = len(full)
        per = []
        for r in ROUNDS:
            cont = full[r["pos"] + 1:]
            assert full[r["pos"]] == r["tokens"][0]
            per.append(variants(r, cont, (16, 24, 32)))
        lens = draft.last_stats.round_lengths.get(0, [])
        check = [p["tree"] + 1 for p in per]
        rec = {k: prompt[k] for k in ("length", "kind", "index")}
        rec["tau"] = draft.last_stats.tau
        rec["rounds"] = len(per)
        rec["sim_matches_actual"] = check[: len(lens)] == list(lens)[: len(check)]
        for key in per[0]:
            rec[key] = sum(p[key] + 1 for p in per) / len(per)
        results.append(rec)
        print(json.dumps(rec), f"{time.time() - t0:.0f}s", flush=True)
        with open(out_path, "a") as f:
            f.write(json.dumps(rec) + "\n")


main()
