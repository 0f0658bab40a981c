"""Plot what a drafted node buys and costs (docs/results/node_budget_h200_*.json): held-out tau per
tree shape against its node count, and the estimated tokens per ms of the 8B-shape round per
context (SmolLM2 tau / 8B round), with the tree the node budget picks marked.

    python benchmarks/plot_node_budget.py docs/results/node_budget_h200_2026-12-01.json \
        --out docs/figures/node_budget_h200.png
"""

import argparse
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # scale_study's model shape


def picked_tree(context: int) -> str:
    """The tree generate() drafts for the 8B shape at batch 1 (128 new tokens after the context)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from hf_longspec import LongSpecDraftConfig
    from hf_longspec.generation.tree_budget import node_budget, tree_within

    from scale_study import LLAMA_8B

    with torch.device("meta"):
        target = LlamaForCausalLM(LlamaConfig(**LLAMA_8B)).to(torch.bfloat16)
    config = LongSpecDraftConfig()
    return "-".join(map(str, tree_within(config, node_budget(config, target, 1, context + 128),
                                          LLAMA_8B["vocab_size"]).widths))


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("result")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    result = json.loads(Path(args.result).read_text())
    figure, (acceptance, speed) = plt.subplots(1, 2, figsize=(11, 4))
    trees = {row["tree"]: row["drafted_nodes"] for row in result["rows"]}
    for tree, nodes in trees.items():
        tau = result["tau_by_tree"][tree]["mean"]
        acceptance.scatter(nodes, tau, color="tab:blue")
        acceptance.annotate(tree, (nodes, tau), textcoords="offset points", xytext=(4, 3), fontsize=7)
    acceptance.set(xlabel="drafted nodes per round", ylabel="held-out tau (SmolLM2, bf16, 2k-8k)",
                   title="What a tree shape buys")
    for context in sorted({row["context"] for row in result["rows"]}):
        rows = sorted((r for r in result["rows"] if r["context"] == context), key=lambda r: r["drafted_nodes"])
        line, = speed.plot([r["drafted_nodes"] for r in rows], [r["tokens_per_ms_estimate"] for r in rows], "o",
                           label=f"{round(context / 1024)}k context")
        chosen = next(r for r in rows if r["tree"] == picked_tree(context))
        speed.scatter(chosen["drafted_nodes"], chosen["tokens_per_ms_estimate"], s=160, facecolors="none",
                      edgecolors=line.get_color(), linewidths=2)
    speed.set(xlabel="drafted nodes per round", ylabel="tau / 8B-shape round (tokens per ms, estimate)",
              title="Per context; circled: the node budget's tree")
    speed.legend()
    figure.tight_layout()
    figure.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
