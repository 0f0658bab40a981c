"""Exact merge of two attention results over disjoint key sets, by their log-sum-exp.

If part a attended keys A and part b keys B with outputs o_a, o_b and log-sum-exps lse_a, lse_b,
attention over A u B is

    o = (e^lse_a o_a + e^lse_b o_b) / (e^lse_a + e^lse_b)
      = sigmoid(lse_a - lse_b) o_a + sigmoid(lse_b - lse_a) o_b,
    lse = logaddexp(lse_a, lse_b).

An empty part (lse = -inf) contributes nothing; if both are empty the result is 0 with lse -inf.
"""

from __future__ import annotations

import torch


def merge_attention_states(
    out_a: torch.Tensor,
    lse_a: torch.Tensor,
    out_b: torch.Tensor,
    lse_b: torch.Tensor,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Merge (out (..., D), lse (...)) pairs in float32; returns (out, lse float32).

    ``out_dtype`` defaults to the promoted dtype of the two outputs.
    """
    if out_dtype is None:
        out_dtype = torch.promote_types(out_a.dtype, out_b.dtype)
    lse_a, lse_b = lse_a.float(), lse_b.float()
    empty_a, empty_b = lse_a == float("-inf"), lse_b == float("-inf")
    # Both empty: any finite difference works, both outputs are zeroed below.
    diff = torch.where(empty_a & empty_b, 0.0, lse_a - lse_b)
    weight_a = torch.sigmoid(diff).unsqueeze(-1)
    weight_b = torch.sigmoid(-diff).unsqueeze(-1)
    o_a = out_a.float().masked_fill(empty_a.unsqueeze(-1), 0.0)
    o_b = out_b.float().masked_fill(empty_b.unsqueeze(-1), 0.0)
    out = weight_a * o_a + weight_b * o_b
    return out.to(out_dtype), torch.logaddexp(lse_a, lse_b)
