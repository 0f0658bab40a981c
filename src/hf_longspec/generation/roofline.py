"""What a verification must spend at least, and what its tree attention adds: the cost model that
decides the node budget (tree_budget.py) and whether compiling the verification pays (loop.py).

A verification reads the target's weights and every row's KV cache once, and a layer never takes
less than its kernels' launch latency. Its tree attention adds arithmetic: every drafted node is a
query row against every cached token of its row, 4 x head_dim FLOP per query head and layer. All
sizes are per rank for a tensor-parallel target (its weight shard, its heads).
"""

from __future__ import annotations

# Measured on the H200 (2026-12-01): the split-KV tree-attention kernel took 4.79 ms for the 1.24
# TFLOP of a 69-node verification at 32k, 8B shape (~258 TFLOP/s,
# docs/results/profile_round_llama8b_32768_2026-12-01.json), against 4.21-4.23 TB/s of copy
# bandwidth: one byte read costs as long as ~61 FLOP.
ATTENTION_FLOPS_PER_BYTE = 61.0
# SmolLM2's verification (30 layers, 8k, graph-replayed) took 2.16 ms: ~72 us per layer of kernel
# latency, as long as reading ~305 MB. A layer is never cheaper than that, whatever its bytes.
LAYER_LATENCY_BYTES = 305e6


def _shape(target):
    config = target.config.get_text_config()
    shards = getattr(target, "tp_size", None) or 1
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return config.num_hidden_layers, config.num_attention_heads // shards, config.num_key_value_heads // shards, head_dim


def _local(parameter):
    """This rank's shard of a DTensor parameter; a plain tensor is already local."""
    return parameter.to_local() if hasattr(parameter, "to_local") else parameter


def read_bytes(target, context: int, batch: int = 1) -> int:
    """Bytes one verification reads at least: the weights, and the KV cache of ``batch`` rows."""
    layers, _, kv_heads, head_dim = _shape(target)
    itemsize = next(target.parameters()).element_size()
    weights = sum(_local(p).numel() * p.element_size() for p in target.parameters())
    return weights + 2 * layers * kv_heads * head_dim * itemsize * context * batch


def latency_bytes(target) -> float:
    """The verification's launch latency, in bytes that reading would take as long."""
    return _shape(target)[0] * LAYER_LATENCY_BYTES


def floor_bytes(target, context: int, batch: int = 1) -> float:
    """What a verification costs at least, in bytes read: its reads, or its latency if that is more."""
    return max(read_bytes(target, context, batch), latency_bytes(target))


def latency_bound(target, context: int, batch: int = 1) -> bool:
    """Whether launch latency, not bytes, bounds the verification (SmolLM2: 9 GB of latency against
    0.5-3 GB of reads; the Llama-3.1-8B shape: 9.8 against 17-33 GB)."""
    return latency_bytes(target) >= read_bytes(target, context, batch)


def query_heads_per_kv_head(target) -> int:
    """The GQA group: query heads the attention kernel packs into the rows of one KV head."""
    _, query_heads, kv_heads, _ = _shape(target)
    return max(1, query_heads // max(1, kv_heads))


def tree_flops_per_row(target, context: int, batch: int = 1) -> int:
    """Tree-attention FLOP per query row (drafted node or root) of every batch row: QK^T and PV."""
    layers, query_heads, _, head_dim = _shape(target)
    return 4 * head_dim * query_heads * layers * context * batch
