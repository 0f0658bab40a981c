"""The draft's decoding memory: a fixed-size ring buffer, plus the per-round tree buffers.

The draft's input is the target's token embedding, so a token's self-attention K/V depend
only on (token, position). The ring therefore holds the last `window` committed tokens and
never grows with the context: slot = position % window. Every update is an index operation on
device tensors, so it can run inside a captured CUDA graph.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DraftRingBuffer:
    keys: torch.Tensor  # (B, H_kv, window, D), post-RoPE
    values: torch.Tensor  # (B, H_kv, window, D)
    positions: torch.Tensor  # (B, window) absolute position held in each slot, -1 = empty

    @classmethod
    def empty(cls, batch_size: int, num_kv_heads: int, window: int, head_dim: int, dtype, device) -> "DraftRingBuffer":
        shape = (batch_size, num_kv_heads, window, head_dim)
        return cls(
            keys=torch.zeros(shape, dtype=dtype, device=device),
            values=torch.zeros(shape, dtype=dtype, device=device),
            positions=torch.full((batch_size, window), -1, dtype=torch.long, device=device),
        )

    @property
    def window(self) -> int:
        return self.positions.shape[1]

    @property
    def nbytes(self) -> int:
        """Bytes of state; constant at any context length."""
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values, self.positions))

    def clear(self) -> None:
        self.positions.fill_(-1)

    def write(self, keys: torch.Tensor, values: torch.Tensor, positions: torch.Tensor,
              valid: torch.Tensor | None = None) -> None:
        """Store K/V (B, H_kv, N, D) of tokens at consecutive absolute `positions` (B, N).

        ``valid`` (B, N) bool leaves the slots of invalid entries untouched (a padded accepted
        path). Only the newest `window` tokens can ever be seen again, so N is cut to the window.
        """
        if positions.shape[1] > self.window:
            keys, values, positions = keys[:, :, -self.window :], values[:, :, -self.window :], positions[:, -self.window :]
            valid = valid[:, -self.window :] if valid is not None else None
        slots = positions % self.window  # (B, N), distinct because positions are consecutive
        batch_index = torch.arange(positions.shape[0], device=positions.device)[:, None]
        keys = keys.permute(0, 2, 1, 3).to(self.keys.dtype)  # (B, N, H, D), the layout indexing yields
        values = values.permute(0, 2, 1, 3).to(self.values.dtype)
        if valid is not None:
            keep = ~valid
            keys = torch.where(keep[..., None, None], self.keys[batch_index, :, slots], keys)
            values = torch.where(keep[..., None, None], self.values[batch_index, :, slots], values)
            positions = torch.where(keep, self.positions[batch_index, slots], positions)
        self.keys[batch_index, :, slots] = keys
        self.values[batch_index, :, slots] = values
        self.positions[batch_index, slots] = positions

    def visibility(self, query_positions: torch.Tensor) -> torch.Tensor:
        """(B, N, window) bool: slot holds a token that a query at that position may see.

        Sliding window W: a query at p sees keys at positions p-W+1 .. p (itself included,
        which lives outside the ring while it is a tree node).
        """
        held = self.positions[:, None, :]
        query = query_positions[:, :, None]
        return (held >= 0) & (held < query) & (query - held < self.window)


@dataclass
class DraftStepContext:
    """Everything one drafting step reads besides its own tokens: preallocated, reused every round.

    tree_keys/tree_values: (B, H_kv, N_run, D) self-attention K/V of the tree nodes run so far
    this round (node id = slot). target_keys/target_values: (B, H_kv, C, D) the bound target
    layer's cache buffers, of which the first ``target_lengths[b]`` entries are committed.
    """

    ring: DraftRingBuffer
    tree_keys: torch.Tensor
    tree_values: torch.Tensor
    target_keys: torch.Tensor
    target_values: torch.Tensor
    target_lengths: torch.Tensor
    extra_target_kv: tuple = ()  # (keys, values) buffers of the extra target layers (extra_target_layer_indices)
    # the entries the cross-attention reads: "config" (the draft config's cross_attention_window, read at each
    # step), None (every committed entry) or W (the anchors and the newest W); a decoder fixes it per call
    cross_attention_window: int | str | None = "config"
