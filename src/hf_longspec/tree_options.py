"""Validation of the per-call draft tree options (`longspec_tree_widths`, `longspec_max_nodes`).

A tree with a non-positive width drafts nothing and a node budget of 0 would be ignored by an
`or` fallback, so both are refused up front with the value and what is allowed."""

from __future__ import annotations

import numbers
from collections.abc import Sequence

from .errors import UnsupportedGenerationError


def _is_positive_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) > 0


def check_tree_options(widths, max_nodes, *, widths_name: str = "longspec_tree_widths",
                       max_nodes_name: str = "longspec_max_nodes") -> None:
    """Raise UnsupportedGenerationError unless `widths` is a non-empty sequence of positive ints
    (None: use the default) and `max_nodes` is a positive int or None (no cap)."""
    if widths is not None:
        if isinstance(widths, (str, bytes)) or not isinstance(widths, Sequence) or len(widths) == 0:
            raise UnsupportedGenerationError(
                f"{widths_name}={widths!r}; allowed: a non-empty list of positive ints, nodes drafted per depth "
                "(e.g. [4, 16, 16, 16, 16]), or None for the draft's default."
            )
        bad = [w for w in widths if not _is_positive_int(w)]
        if bad:
            raise UnsupportedGenerationError(
                f"{widths_name}={list(widths)!r} has {'a width' if len(bad) == 1 else 'widths'} "
                f"{', '.join(repr(w) for w in bad)} that {'is' if len(bad) == 1 else 'are'} not a positive int; "
                "allowed: a non-empty list of positive ints (nodes drafted per depth), or None for the draft's default."
            )
    if max_nodes is not None and not _is_positive_int(max_nodes):
        raise UnsupportedGenerationError(
            f"{max_nodes_name}={max_nodes!r}; allowed: a positive int (cap on drafted nodes per round) "
            "or None for no cap."
        )
