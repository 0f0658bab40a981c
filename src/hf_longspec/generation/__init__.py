"""LongSpec tree speculation inside ``target.generate``.

    decoder.py     LongSpecDecoder: one round (draft -> verify -> accept -> commit) on preallocated buffers
    draft_tree.py  static-shape tree drafting         acceptance.py  greedy on device, host walk + sampling
    tree_cache.py  the preallocated target cache      stats.py       draft.last_stats
    loop.py        longspec_generate, a thin loop     routing.py     assistant_model=draft -> loop
    checks.py      refusals before any forward        tree_budget.py  nodes per round, and which tree
    sampled_accept.py  sampled acceptance on the device (row-wise warpers), inside the captured round
    lookup.py      the prompt-lookup chain            roofline.py    what a round must read
"""

from . import tree_budget
from .decoder import LongSpecDecoder
from .draft_tree import TreeLayout
from .loop import longspec_generate, release_decoders
from .routing import install_longspec_generate
from .stats import LongSpecStats
from .tree_cache import TreeKVCache

__all__ = ["LongSpecDecoder", "LongSpecStats", "TreeKVCache", "TreeLayout", "install_longspec_generate",
           "longspec_generate", "release_decoders"]
