"""How many nodes a round may draft, and which tree it drafts then.

Every drafted node is one more query row of the verification's tree attention, against every cached
token of its row. Below ~60 rows per KV head that attention is bound by reading the KV cache once,
so nodes are nearly free; past it the arithmetic binds, and it grows with nodes x context. At
128k tokens, 69 nodes x 32 query heads against the Llama-3.1-8B cache is 4.7 TFLOP per
verification: more time than reading the weights and the whole cache.

So the node budget is the tightest of three caps:
- ``tree_max_nodes`` (draft config), if set;
- ``tree_batch_nodes // batch`` (draft config): the verification forward grows with rows x nodes;
- the context cap: the tree attention's arithmetic may take at most ``TREE_ATTENTION_SHARE`` of the
  verification's unavoidable time, which is reading the weights and the KV cache once, or, for a
  small model, the launch latency of its layers (SmolLM2's verification is latency-bound).

Under a budget smaller than the draft's tree, the draft does not cut its tree depth-first (4-16-16-16-16
cut to 32 nodes is 4-16-12: shallow). It drafts the largest tree of its ``tree_ladder`` that fits:
trees chosen by held-out acceptance per node (docs/benchmarks.md, "Node budget"). Greedy tau at 2k-8k
in bf16 on the H200: 2-6-8-8-8 3.39 against 4-16-12 2.94, at 32 nodes each.
"""

from __future__ import annotations

from .draft_tree import TreeLayout

# Measured on the H200 (2026-12-01, docs/benchmarks.md): the split-KV tree-attention kernel ran at
# ~258 TFLOP/s against 4.23 TB/s of copy bandwidth, so one byte of reading costs as long as ~61 FLOP.
ATTENTION_FLOPS_PER_BYTE = 61.0
# SmolLM2's verification (30 layers, 8k, graph-replayed) took 2.16 ms: ~72 us per layer of kernel
# latency, as long as reading ~305 MB. A layer is never cheaper than that, whatever its bytes.
LAYER_LATENCY_BYTES = 305e6
# The share of the verification's floor the tree attention's arithmetic may add. Chosen on the
# 8B-shape round costs of 2026-12-01 with the SmolLM2 draft's tau per tree: it picks the tree with
# the most tokens per ms at 8k (the full tree), 32k (32 nodes) and 128k (8 nodes).
TREE_ATTENTION_SHARE = 0.5


def context_node_budget(target, context: int, batch: int = 1) -> int:
    """Drafted nodes per row (root excluded) whose tree attention over ``context`` cached tokens stays
    within ``TREE_ATTENTION_SHARE`` of what the verification must spend anyway."""
    config = target.config.get_text_config()
    layers, query_heads = config.num_hidden_layers, config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // query_heads
    parameter = next(target.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in target.parameters())
    kv_bytes = 2 * layers * config.num_key_value_heads * head_dim * parameter.element_size() * context * batch
    floor_bytes = max(weight_bytes + kv_bytes, layers * LAYER_LATENCY_BYTES)
    flops_per_row = 4 * head_dim * query_heads * layers * context * batch  # QK^T and PV, every layer
    rows = TREE_ATTENTION_SHARE * floor_bytes * ATTENTION_FLOPS_PER_BYTE / flops_per_row
    return max(1, int(rows) - 1)  # the root is a row too


def node_budget(draft_config, target, batch: int, context: int) -> int | None:
    """The tightest of the config's node cap, the per-batch cap and the context cap (None: no cap)."""
    caps = [draft_config.tree_max_nodes, context_node_budget(target, context, batch)]
    if getattr(draft_config, "tree_batch_nodes", None):
        caps.append(max(1, draft_config.tree_batch_nodes // batch))
    caps = [cap for cap in caps if cap is not None]
    return min(caps) if caps else None


def tree_within(draft_config, budget: int | None, vocab_size: int) -> TreeLayout:
    """The draft's own tree if it fits ``budget``, else the largest ladder tree that does, else the
    smallest one cut to the budget."""
    own = tuple(draft_config.tree_widths)
    ladder = [tuple(t) for t in getattr(draft_config, "tree_ladder", None) or ()]
    candidates = [own] + [t for t in ladder if sum(t) < sum(own)]
    for widths in candidates:
        if budget is None or sum(widths) <= budget:
            return TreeLayout.plan(widths, None, vocab_size)
    return TreeLayout.plan(candidates[-1], budget, vocab_size)
