"""One step of recursive rejection sampling, on rows of probabilities: the law both tree walks share.

The device walk (``sampled_accept.sample_accept``) runs it on every row of a batch at once, inside
the captured round; the host walk (``PathVerifier._sample_walk``) on one row, where a logits
processor reads the text or scores are returned. Written once, so the two cannot drift apart.
"""

from __future__ import annotations

import torch

_TINY = torch.finfo(torch.float32).tiny

# A node's first draws tried, at most: each try is a pass over the vocabulary, and with re-ranked leaves a
# node may hold 20 or more children, though later draws are seldom accepted (on the CPU, sampled at
# temperature 0.8, 3 of 354 accepted children were past the 8th: forty-fifth session). Stopping early keeps
# the law: rejection sampling over any prefix of the draws, then the residual, is exact.
CHILDREN_TRIED = 8


def try_child(p, q, token, offered, uniform):
    """One draft child ``token`` (B,) against the rows' residual target law p (B, V) and draft law q
    (B, V): accepted with probability min(1, p(x) / q(x)). On rejection p <- norm(max(p - q, 0)) and x
    leaves q. Rows not ``offered`` are unchanged. Returns (p, q, accepted)."""
    p_token = p.gather(1, token[:, None])[:, 0]
    q_token = q.gather(1, token[:, None])[:, 0]
    accepted = offered & (uniform * q_token < p_token)
    rejected = (offered & ~accepted)[:, None]
    residual = (p - q).clamp_(min=0)
    total = residual.sum(dim=-1, keepdim=True)
    p = torch.where(rejected & (total > 0), residual / total.clamp(min=_TINY), p)
    without = q.scatter(1, token[:, None], 0.0)
    q = torch.where(rejected, without / without.sum(dim=-1, keepdim=True).clamp(min=_TINY), q)
    return p, q, accepted


def try_chain_token(p, token, offered, uniform):
    """The lookup chain's ``token`` as a one-hot proposal: accepted with probability p(token), else it
    leaves p. The chain does not depend on the draft's draws, so what comes out stays distributed as p.
    Returns (p, accepted)."""
    p_token = p.gather(1, token[:, None])[:, 0]
    accepted = offered & (uniform < p_token)
    rejected = (offered & ~accepted)[:, None]
    without = p.scatter(1, token[:, None], 0.0)
    p = torch.where(rejected, without / without.sum(dim=-1, keepdim=True).clamp(min=_TINY), p)
    return p, accepted


def draw(p):
    """One token per row from p (B, V): an exponential race, a draw from p without a host sync."""
    return (p / -torch.log(torch.rand_like(p).clamp_(min=_TINY))).argmax(dim=-1)
