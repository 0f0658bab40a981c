"""Float64 references and random trees for the attention tests (not a test module)."""

from __future__ import annotations

import zlib

import torch

from hf_longspec.testing import ancestor_or_self_mask, random_parents, random_tree_mask  # noqa: F401 (re-exported)

# ||out - ref|| / ||ref|| bounds per input dtype; the same numbers bound max |lse - ref| / max(1, |ref|).
TOLERANCE = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}


def generator_for(request) -> torch.Generator:
    """A generator seeded from the test id: fixed per case, different between cases."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


def randn(generator: torch.Generator, *shape, dtype=torch.float32, scale: float = 1.0) -> torch.Tensor:
    return (torch.randn(*shape, generator=generator) * scale).to(dtype)


def tree_depths(parents: list[int]) -> list[int]:
    depths = []
    for parent in parents:
        depths.append(0 if parent < 0 else depths[parent] + 1)
    return depths


def reference_attention(q, k, v, scale, allowed=None):
    """float64 attention with repeat_kv; ``allowed``: bool broadcastable to (B, 1, T, S).

    Returns out (B, Hq, T, D) and lse (B, Hq, T); rows that see nothing: out 0, lse -inf.
    """
    group = q.shape[1] // k.shape[1]
    keys = k.double().repeat_interleave(group, dim=1)
    values = v.double().repeat_interleave(group, dim=1)
    scores = q.double() @ keys.transpose(-1, -2) * scale
    if allowed is not None:
        if allowed.dim() == 2:
            allowed = allowed.unsqueeze(0)
        if allowed.dim() == 3:
            allowed = allowed.unsqueeze(1)
        scores = scores.masked_fill(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    return probs @ values, lse


def prefix_and_tree_allowed(tree_mask: torch.Tensor, prefix_len: int) -> torch.Tensor:
    """(B|1, T, S + T): every tree row sees the whole prefix, then the tree mask."""
    tree_mask = tree_mask if tree_mask.dim() == 3 else tree_mask.unsqueeze(0)
    visible_prefix = torch.ones(*tree_mask.shape[:2], prefix_len, dtype=torch.bool)
    return torch.cat([visible_prefix, tree_mask], dim=-1)


def assert_close_attention(out, lse, ref_out, ref_lse, dtype):
    """Relative-norm check of out, max (relative where |lse| > 1) check of lse (skipped when lse is
    None); NaN never passes; -inf must match exactly and such rows must be 0."""
    tol = TOLERANCE[dtype]
    assert not torch.isnan(out).any(), "NaN in output (unwritten or bad arithmetic)"
    assert torch.isfinite(out).all()
    empty = ref_lse == float("-inf")
    if empty.any():
        assert torch.all(out.double()[empty] == 0), "rows that attend nothing must be 0"
    rel = ((out.double() - ref_out).norm() / ref_out.norm().clamp_min(1e-30)).item()
    assert rel <= tol, f"relative error {rel:.3e} > {tol:.0e}"
    if lse is None:
        return rel
    assert not torch.isnan(lse).any(), "NaN in lse"
    lse64 = lse.double()
    assert torch.equal(lse64 == float("-inf"), empty), "lse -inf pattern differs"
    if (~empty).any():
        # Relative to the magnitude where |lse| > 1: float32 holds about 7 significant digits.
        lse_err = ((lse64[~empty] - ref_lse[~empty]).abs() / ref_lse[~empty].abs().clamp_min(1.0)).max().item()
        assert lse_err <= tol, f"lse error {lse_err:.3e} > {tol:.0e}"
    return rel
