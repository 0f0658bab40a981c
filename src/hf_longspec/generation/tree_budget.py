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
trees chosen by held-out acceptance per node (configuration_longspec.DEFAULT_TREE_LADDER says which
and what they measured). Trees the caller names (``longspec_tree_widths``) are cut depth-first, as
they always were by the node caps.

On a CPU none of this holds: every verified row is arithmetic (a forward over 2-8 new rows costs twice a
one-row step, and more with every row after 8), and each draft depth re-runs the shared LM head. A draft
config may name the round a CPU drafts instead (``cpu_tree_widths``, ``cpu_lookup_tokens``): a small tree
and a chain, whose copied passages are the cheapest tokens a CPU verifies. The shipped draft does
(docs/benchmarks.md, "The CPU's own round").
"""

from __future__ import annotations

from . import roofline
from .draft_tree import TreeLayout

# The share of the verification's floor the tree attention's arithmetic may add. Fitted on the
# 8B-shape round costs of 2026-12-01 with the SmolLM2 draft's tau per tree (docs/benchmarks.md, "Node
# budget"): it picks the tree with the most tokens per ms at 8k (the whole tree), 32k (32 nodes) and
# 128k (8 nodes), the three points tests/test_tree_budget.py holds it to. Other shapes are untested.
# Counted in whole row tiles (below) it picks 31 and 15 nodes there: the best measured again after the
# kernel's row tiles changed (docs/benchmarks.md, "Row tiles").
TREE_ATTENTION_SHARE = 0.5
# The attention kernel packs a KV head's query heads x tree rows into tiles of 64 or 128 rows
# (kernels/prefix_splitkv.py), pads the last, and each tile reads the row's whole KV. So rows are
# budgeted in whole 64-row tiles, rounded to the nearest: at 128k (8B shape) the share allows 14 rows,
# 56 packed, and a 15-node tree (64 packed, one tile) verifies as fast as an 8-node one (12.30 against
# 12.04 ms; its round 17.25 against 16.05 with one more draft depth, for tau 2.91 against 2.52,
# H200 2026-12-01), while 17 rows (68) would open a second tile.
PACKED_ROW_TILE = 64
# The CPU's own round, which `hf-longspec train` writes into a draft's config as the shipped draft has it
# (cpu_tree_widths, cpu_lookup_tokens). The best of six small rounds on the 2-core development CPU (float32,
# 9 held-out 4000-token prompts of code, prose and non-English text, vanilla static in the same run): 1.89x
# vanilla (geometric mean), 1-1-1-1 + 16 1.79x, the GPU round (4-16-16-16-16 + 32) 0.84x
# (docs/benchmarks.md, "The CPU's own round").
TRAINED_DRAFT_CPU_TREE_WIDTHS = (1, 1, 1)
TRAINED_DRAFT_CPU_LOOKUP_TOKENS = 16


def context_node_budget(target, context: int, batch: int = 1) -> int:
    """Drafted nodes per row (root excluded) whose tree attention over ``context`` cached tokens stays
    within ``TREE_ATTENTION_SHARE`` of what the verification must spend anyway (roofline.py). Counted
    per rank for a tensor-parallel target; the ranks then agree on the smallest (HeadShard.smallest)."""
    floor = roofline.floor_bytes(target, context, batch)
    rows = TREE_ATTENTION_SHARE * floor * roofline.ATTENTION_FLOPS_PER_BYTE / roofline.tree_flops_per_row(target, context, batch)
    group = roofline.query_heads_per_kv_head(target)
    if group * rows >= PACKED_ROW_TILE / 2:  # whole tiles: round the packed rows to the nearest tile
        rows = max(PACKED_ROW_TILE, round(group * rows / PACKED_ROW_TILE) * PACKED_ROW_TILE) // group
    return max(1, int(rows) - 1)  # the root is a row too


def node_budget(draft_config, target, batch: int, context: int) -> int:
    """The tightest of the config's node cap, the per-batch cap and the context cap."""
    caps = [context_node_budget(target, context, batch)]
    if draft_config.tree_max_nodes is not None:
        caps.append(draft_config.tree_max_nodes)
    if getattr(draft_config, "tree_batch_nodes", None):
        caps.append(max(1, draft_config.tree_batch_nodes // batch))
    return min(caps)


def tree_within(draft_config, budget: int | None, vocab_size: int, on_cpu: bool = False) -> TreeLayout:
    """The draft's own tree if it fits ``budget`` (None: any size), else the largest ladder tree that
    does, else the smallest one cut to the budget. Ladder trees deeper than the draft's own are never
    used: its training drew noise shifts up to its own depth only. ``on_cpu``: the config's
    ``cpu_tree_widths`` where it sets them, cut to the budget depth-first."""
    if on_cpu and draft_config.cpu_tree_widths:
        return TreeLayout.plan(draft_config.cpu_tree_widths, budget, vocab_size)
    own = tuple(draft_config.tree_widths)
    ladder = [tuple(t) for t in getattr(draft_config, "tree_ladder", None) or ()]
    smaller = sorted((t for t in ladder if sum(t) < sum(own) and len(t) <= len(own)), key=sum, reverse=True)
    candidates = [own, *smaller]
    for widths in candidates:
        if budget is None or sum(widths) <= budget:
            return TreeLayout.plan(widths, None, vocab_size)
    return TreeLayout.plan(candidates[-1], budget, vocab_size)


def lookup_within(draft_config, budget: int, tree: TreeLayout, chains: int = 1, on_cpu: bool = False) -> int:
    """The default chain length, for greedy and sampled calls alike: the draft config's (``on_cpu``: its
    ``cpu_lookup_tokens`` where set), cut to the nodes ``budget`` leaves after ``tree``, shared by ``chains``
    chains of one length. Sampled calls had none until the forty-eighth session; since their walk compiles whole
    beside a chain, it paid in every cell measured on an H100 (against vanilla static sampled in the same run, 4k
    and 8k, code and prose: 1.93-3.28x with the 32-token chain against 1.52-2.27x without; docs/benchmarks.md);
    on the CPU, with its 16-token chain, 1.29x over 12 prompts of four kinds (a geometric mean: up to 3.4x where the
    text repeats itself or copies the prompt, 0.87-0.98x on the six it lost, prose among them)."""
    wanted = draft_config.lookup_tokens
    if on_cpu and draft_config.cpu_lookup_tokens is not None:
        wanted = draft_config.cpu_lookup_tokens
    return max(0, min(wanted, (budget - sum(tree.widths)) // chains))
