"""How long torch.compile (inductor) takes over the sampled walk as the chain grows, on the CPU: the shipped tree
(4-16-16-16-16, re-ranked leaves), a 4096-token vocabulary, one row; compile plus one run.

    PYTHONPATH=src python walk_compile_time_cpu.py LOOKUP        (run from the repository root)

Forty-sixth session, this project's 2-core CPU: chain 0 55.2 s and 8 74.6 s (both while CI ran beside them), 16
168.2 s (while the 32 ran beside it), 32 not done after 1200 s (killed by `timeout 1200`, alone after its first
4 minutes).
"""
import sys
import time

import torch

sys.path.insert(0, "benchmarks")  # walk_bench.random_tree
import walk_bench  # noqa: E402

from hf_longspec.generation import sampled_accept as sa  # noqa: E402
from hf_longspec.generation.draft_tree import TreeLayout  # noqa: E402

walk_bench.VOCAB = 4096
lookup = int(sys.argv[1])
layout = TreeLayout((4, 16, 16, 16, 16), lookup, rerank_leaves=True)
tree, scores = walk_bench.random_tree(layout, 1, "cpu")
compiled = torch.compile(sa.sample_accept)
slots = sa.child_slot_ids(layout, scores.device)
begin = time.time()
compiled(layout, tree, scores, None, 8, slots)
print("lookup", lookup, "compile+run s", round(time.time() - begin, 1))
