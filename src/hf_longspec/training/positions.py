"""Anchor-Offset Indices and Flash Noisy Training shifts: the two knobs that let short training
sequences stand in for long-context inference."""

from __future__ import annotations

import torch


def anchor_offset_position_ids(
    batch_size: int,
    seq_len: int,
    max_positions: int,
    num_anchors: int = 4,
    generator: torch.Generator | None = None,
    enabled: bool = True,
) -> torch.Tensor:
    """(B, L) positions [0..s-1, s+off, s+off+1, ...] with `off` uniform per row, so that the
    last position stays below `max_positions`. The target sees them too: its attention sinks
    stay at 0..s-1 while the rest of the sequence sits deep in the context, as at inference."""
    plain = torch.arange(seq_len)[None].expand(batch_size, -1).clone()
    if not enabled or seq_len >= max_positions or num_anchors >= seq_len:
        return plain
    largest_offset = max_positions - seq_len
    offsets = torch.randint(0, largest_offset + 1, (batch_size, 1), generator=generator)
    plain[:, num_anchors:] += offsets
    return plain


def anchor_offset_for_sample(seq_len: int, max_positions: int, num_anchors: int, seed: int, sample: int,
                             occurrence: int, enabled: bool = True) -> torch.Tensor:
    """(L,) anchor-offset positions of one sample; the offset depends only on (seed, sample,
    occurrence), so data-parallel ranks draw exactly what a single process would."""
    generator = torch.Generator().manual_seed(hash((seed, sample, occurrence)) & 0x7FFF_FFFF_FFFF)
    return anchor_offset_position_ids(1, seq_len, max_positions, num_anchors, generator, enabled)[0]


def noise_shift(max_shift: int, generator: torch.Generator | None = None, enabled: bool = True,
                weights: tuple[float, ...] | None = None) -> int:
    """How many of the newest target K/V entries the draft may not read this step.

    At inference the draft runs tree depths 0..D-1 (the leaves at depth D never run), and the node at
    depth k reads the target's K/V up to the root's predecessor: shift k + 1, so shifts 1..D occur.
    Off = always 1, the smallest real gap (0 would let the draft read the very token it predicts
    from, which inference never allows). `weights` (shifts 1, 2, ...) draws a shift in proportion to
    them; without them the shift is uniform over 1..max_shift, the default and every shipped draft's
    recipe (max_shift D + 1: one shift more than inference uses; weights tied with it, docs/training.md)."""
    if not enabled:
        return 1
    if weights is not None:
        return 1 + int(torch.multinomial(torch.tensor(weights, dtype=torch.float64), 1, generator=generator))
    if max_shift <= 1:
        return 1
    return int(torch.randint(1, max_shift + 1, (1,), generator=generator))
