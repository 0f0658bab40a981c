"""Batches for LongSpecTrainer: stacked chunks plus the step's random positions and noise shift.

The randomness is a function of what is being collated, not of how the batch is split: a row's
positions depend on (seed, sample index, how often that sample was seen) and the shift on
(seed, step), so N data-parallel ranks with batch b train exactly like one process with batch N*b.

`answer_only`: every row carries a `prompt_mask` (a dataset with chat records, training/data.py) and
the batch gets a `loss_mask` that leaves out the records' prompt tokens, so the loss is taken on the
target's answers and on corpus text. The loss is then a mean over each rank's own trained tokens, so
N ranks equal one process with batch N*b only up to how those tokens fall across the ranks."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .positions import anchor_offset_for_sample, anchor_offset_position_ids, noise_shift


@dataclass
class LongSpecCollator:
    max_positions: int
    num_anchors: int = 4
    max_noise_shift: int = 6  # tree depth + 1 (uniform shifts; positions.noise_shift)
    anchor_offset: bool = True
    noisy: bool = True
    noise_shift_weights: tuple[float, ...] | None = None  # weights of shifts 1, 2, ... instead of uniform
    seed: int = 0
    answer_only: bool = False

    def __post_init__(self):
        self.generator = torch.Generator().manual_seed(self.seed)  # for features without an index
        self.restore(0, 0)

    def restore(self, batches_done: int, epochs_done: int) -> None:
        """Continue a resumed run exactly where it stopped: the Trainer skips the batches already
        trained without collating them, so the counters are set from the restored training state
        (`batches_done` collate calls so far; every sample seen once per finished epoch)."""
        self.steps = batches_done
        self.epochs_done = epochs_done
        self.seen = {}

    def __call__(self, features: list[dict]) -> dict:
        input_ids = torch.stack([f["input_ids"] for f in features])
        batch, seq = input_ids.shape
        if all("index" in f for f in features):
            rows = []
            for feature in features:
                sample = int(feature["index"])
                seen_now = self.seen.get(sample, 0)
                self.seen[sample] = seen_now + 1
                occurrence = self.epochs_done + seen_now
                rows.append(anchor_offset_for_sample(seq, self.max_positions, self.num_anchors, self.seed, sample,
                                                     occurrence, self.anchor_offset))
            position_ids = torch.stack(rows)
        else:
            position_ids = anchor_offset_position_ids(
                batch, seq, self.max_positions, self.num_anchors, self.generator, self.anchor_offset
            )
        step_generator = torch.Generator().manual_seed(hash((self.seed, self.steps)) & 0x7FFF_FFFF_FFFF)
        self.steps += 1
        batch_inputs = {
            "input_ids": input_ids,
            "position_ids": position_ids,
            "noise_shift": torch.tensor(noise_shift(self.max_noise_shift, step_generator, self.noisy,
                                                     self.noise_shift_weights)),
        }
        if self.answer_only:
            if not all("prompt_mask" in f for f in features):
                raise ValueError("answer_only needs every row's prompt_mask, which a dataset with chat records "
                                 "gives (LocalTextChunks with a chat share); these rows have none")
            batch_inputs["loss_mask"] = ~torch.stack([f["prompt_mask"] for f in features])
        return batch_inputs
