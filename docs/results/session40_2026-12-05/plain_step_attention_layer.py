"""PYTHONPATH=src python docs/results/session40_2026-12-05/plain_step_attention_layer.py

One layer's attention for a plain step at 8k (SmolLM2's 9 query and 3 KV heads, float32, random values, this
CPU): the one SDPA call (`hybrid._root_alone_attention`) against the custom op's prefix + tree + merge for a
one-node tree, and that op for a 20-node tree (the CPU round's 1-1-1 tree and 16-token chain) for scale."""
import time

import torch

from hf_longspec.attention import hybrid

torch.manual_seed(0)
batch, q_heads, kv_heads, head_dim, capacity, filled = 1, 9, 3, 64, 8200, 8000
keys, values = torch.randn(batch, kv_heads, capacity, head_dim), torch.randn(batch, kv_heads, capacity, head_dim)
lengths = torch.tensor([filled])


def ms(fn, n=200):
    for _ in range(10):
        fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e3


root = torch.randn(batch, 1, q_heads, head_dim).transpose(1, 2)
one = torch.ones(batch, 1, 1, dtype=torch.bool)
tree = torch.randn(batch, 20, q_heads, head_dim).transpose(1, 2)
mask = torch.tril(torch.ones(batch, 20, 20, dtype=torch.bool))
print(f"one SDPA call, root alone:        {ms(lambda: hybrid._root_alone_attention(root, keys, values, lengths, 0.125)):.3f} ms")
print(f"prefix + tree + merge, root alone: {ms(lambda: hybrid.cached_tree_attention(root, keys, values, one, lengths, 0.125)):.3f} ms")
print(f"prefix + tree + merge, 20 nodes:   {ms(lambda: hybrid.cached_tree_attention(tree, keys, values, mask, lengths, 0.125)):.3f} ms")
