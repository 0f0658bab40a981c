"""Hybrid Tree Attention for target-model verification, as a transformers attention function.

``register_longspec_attention()`` then ``attn_implementation="longspec_hybrid"``; pass the tree
mask as the ``longspec_tree_mask=`` forward kwarg on tree-verification calls.
"""

from .hybrid import (
    LONGSPEC_ATTENTION,
    LONGSPEC_ATTENTION_EAGER,
    PREFIX_LENGTHS_KWARG,
    TREE_MASK_KWARG,
    cached_tree_attention,
    hybrid_name_for,
    hybrid_tree_attention,
    longspec_attention_forward,
    register_longspec_attention,
    use_hybrid_attention,
)
from .merge import merge_attention_states
from .prefix import (
    PREFIX_BACKENDS,
    prefix_attention,
    prefix_backend_available,
    prefix_backend_name,
    requested_prefix_backend,
    set_prefix_backend,
)
from .tree import tree_attention, tree_uses_triton

__all__ = [
    "LONGSPEC_ATTENTION",
    "LONGSPEC_ATTENTION_EAGER",
    "PREFIX_LENGTHS_KWARG",
    "cached_tree_attention",
    "hybrid_name_for",
    "PREFIX_BACKENDS",
    "TREE_MASK_KWARG",
    "hybrid_tree_attention",
    "longspec_attention_forward",
    "merge_attention_states",
    "prefix_attention",
    "prefix_backend_available",
    "prefix_backend_name",
    "register_longspec_attention",
    "requested_prefix_backend",
    "set_prefix_backend",
    "tree_attention",
    "tree_uses_triton",
    "use_hybrid_attention",
]
