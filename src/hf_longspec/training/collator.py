"""Batches for LongSpecTrainer: stacked chunks plus the step's random positions and noise shift."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .positions import anchor_offset_position_ids, noise_shift


@dataclass
class LongSpecCollator:
    max_positions: int
    num_anchors: int = 4
    max_noise_shift: int = 6  # tree depth + 1
    anchor_offset: bool = True
    noisy: bool = True
    seed: int = 0

    def __post_init__(self):
        self.generator = torch.Generator().manual_seed(self.seed)

    def __call__(self, features: list[dict]) -> dict:
        input_ids = torch.stack([f["input_ids"] for f in features])
        batch, seq = input_ids.shape
        return {
            "input_ids": input_ids,
            "position_ids": anchor_offset_position_ids(
                batch, seq, self.max_positions, self.num_anchors, self.generator, self.anchor_offset
            ),
            "noise_shift": torch.tensor(noise_shift(self.max_noise_shift, self.generator, self.noisy)),
        }
