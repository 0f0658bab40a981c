"""The target's KV cache, preallocated once: what lets a verification round be a CUDA-graph replay.

All layers live in ONE tensor ``storage`` (layers, 2, B, H_kv, capacity, D), so committing an
accepted tree path in every layer is one gather and one scatter, not two per layer. The number of
committed entries per row, ``lengths`` (B,), is a device tensor: the attention kernels read it
from memory and nothing on the host needs it, so one captured graph serves every prefix length.

It is a transformers ``Cache``: the target's attention layers call ``update`` as with any
cache; ``update`` writes the new K/V at ``write_positions`` (set by the round before each forward)
and returns the whole buffers. Positions beyond a row's length hold stale data that no query may
read: the hybrid attention reads only [0, length) plus the tree's own slots.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer


class _BufferLayer:
    """One layer's view into the shared storage (what code reading ``cache.layers[i].keys`` expects)."""

    is_sliding = False
    is_compileable = True
    is_initialized = True
    supports_early_init = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor):
        self.keys = keys
        self.values = values


class TreeKVCache(Cache):
    """Preallocated target cache of ``capacity`` tokens per row, for tree verification."""

    is_compileable = True

    def __init__(self, num_layers: int, batch_size: int, num_kv_heads: int, head_dim: int, capacity: int,
                 max_tree_nodes: int, dtype: torch.dtype, device: torch.device):
        self.storage = torch.zeros(num_layers, 2, batch_size, num_kv_heads, capacity, head_dim, dtype=dtype,
                                   device=device)
        super().__init__(layers=[_BufferLayer(self.storage[i, 0], self.storage[i, 1]) for i in range(num_layers)])
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
        self.write_positions = torch.zeros(batch_size, max_tree_nodes, dtype=torch.long, device=device)
        self.capacity = capacity

    # ------------------------------------------------------------------ transformers Cache API
    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Write (B, H_kv, T, D) new K/V at ``write_positions[:, :T]``; return the layer's full buffers."""
        layer = self.layers[layer_idx]
        batch, heads, count, dim = key_states.shape
        index = self.write_positions[:, None, :count, None].expand(batch, heads, count, dim)
        layer.keys.scatter_(2, index, key_states.to(layer.keys.dtype))
        layer.values.scatter_(2, index, value_states.to(layer.values.dtype))
        return layer.keys, layer.values

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Always 0. Per-row lengths live in ``lengths`` on the device; LongSpec passes position_ids on
        every forward, and transformers reads this only to invent positions when none are given (or
        as a ``cache_position`` nobody here uses). A constant keeps compiled code from specializing
        (recompiling) on the prefix length."""
        return 0

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return self.capacity, 0

    def get_max_cache_shape(self, layer_idx: int = 0) -> int:
        return self.capacity

    # ------------------------------------------------------------------ LongSpec
    @property
    def nbytes(self) -> int:
        return self.storage.numel() * self.storage.element_size()

    def layer_kv(self, layer_index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(keys, values) buffers (B, H_kv, capacity, D) of one target layer, without copying."""
        layer = self.layers[layer_index]
        return layer.keys, layer.values

    def prompt_cache(self) -> Cache:
        """A cache for the prompt's prefill forward that writes each layer's K/V straight into this
        cache's buffers, so the prompt's KV exists once (no prefill cache to copy from and free)."""
        return Cache(layers=[_PromptLayer(layer.keys, layer.values) for layer in self.layers])

    @torch.no_grad()
    def adopt_prompt(self, length: int, starts: list[int] | None = None) -> None:
        """After a prefill through ``prompt_cache()``: each row's real tokens [starts[b], length) (left
        padding skipped) move to [0, length - starts[b]) within these buffers."""
        self._take_rows(self, length, starts)

    @torch.no_grad()
    def load(self, source: Cache, length: int, starts: list[int] | None = None) -> None:
        """Copy every layer of another cache (e.g. the prefill's): row b's entries [starts[b], length)
        (left padding skipped) land at [0, length - starts[b]), so each row's prefix starts at 0. Each
        source layer is released once copied: one copy of the KV at a time."""
        self._take_rows(source, length, starts)

    def _take_rows(self, source: Cache, length: int, starts: list[int] | None) -> None:
        starts = starts or [0] * self.lengths.shape[0]
        if length - min(starts) > self.capacity:
            raise ValueError(f"{length - min(starts)} cached tokens do not fit a cache of capacity {self.capacity}")
        in_place = source is self
        for mine, theirs in zip(self.layers, source.layers):
            for row, start in enumerate(starts):
                if in_place and start == 0:
                    continue  # already where it belongs
                for dst, src in ((mine.keys, theirs.keys), (mine.values, theirs.values)):
                    moved = src[row, :, start:length]
                    dst[row, :, : length - start].copy_(moved.clone() if in_place else moved)  # ranges overlap
            if not in_place:
                _release(theirs)
        self.lengths.copy_(torch.tensor([length - start for start in starts]))

    @torch.no_grad()
    def commit(self, path_nodes: torch.Tensor, accepted: torch.Tensor) -> None:
        """Keep the accepted tree path right after each row's prefix, in every layer; advance lengths.

        path_nodes: (B, P) tree-node ids (root first) of the accepted path, padded past
        ``accepted`` (B,) entries with any valid id. The tree's K/V were written at
        ``lengths + node``; entries [length, length + P) receive them in path order (the padded
        tail lands past the new length, where nothing reads it). Device ops only.
        """
        layers, _, batch, heads, _, dim = self.storage.shape
        base = self.lengths[:, None]
        source = (base + path_nodes)[None, None, :, None, :, None].expand(layers, 2, batch, heads, -1, dim)
        target = (base + torch.arange(path_nodes.shape[1], device=base.device))[None, None, :, None, :, None]
        kept = self.storage.gather(4, source)
        self.storage.scatter_(4, target.expand_as(source), kept)
        self.lengths.add_(accepted)

    def export_to(self, destination: Cache, lengths: list[int], offsets: list[int] | None = None) -> None:
        """Write the committed entries back into the cache generate() handed us: row b's first
        lengths[b] entries land at [offsets[b], offsets[b] + lengths[b]), so a left-padded batch keeps
        vanilla's layout (slot = column of the returned sequences); padding slots and the ends of
        rows that stopped early hold zeros."""
        offsets = offsets or [0] * len(lengths)
        longest = max(offset + length for offset, length in zip(offsets, lengths))
        # rows that stopped early: generate() checks this before continuing from the cache (checks.CUT_SHORT_ROWS)
        destination._longspec_rows_cut_short = [row for row, (offset, length) in enumerate(zip(offsets, lengths))
                                                if offset + length < longest]
        for index, mine in enumerate(self.layers):
            theirs = destination.layers[index] if index < len(destination.layers) else None
            static = theirs is not None and not isinstance(theirs, DynamicLayer)  # cache_implementation="static"
            if static:
                keys, values = _full_size_buffers(theirs, mine.keys[:, :, :1], mine.values[:, :, :1])
            else:
                shape = mine.keys.shape[:2] + (longest,) + mine.keys.shape[3:]
                keys, values = mine.keys.new_zeros(shape), mine.values.new_zeros(shape)
            for row, (offset, length) in enumerate(zip(offsets, lengths)):
                keys[row, :, offset:offset + length] = mine.keys[row, :, :length]
                values[row, :, offset:offset + length] = mine.values[row, :, :length]
            if theirs is None:  # a lazily built DynamicCache that never saw this layer: let it create one
                destination.update(keys, values, index)
            elif static:
                if hasattr(theirs, "cumulative_length"):
                    theirs.cumulative_length.fill_(longest)
            else:  # possibly never written (the prompt went straight to us)
                theirs.keys, theirs.values = keys, values
                theirs.device, theirs.dtype, theirs.is_initialized = keys.device, keys.dtype, True


def _full_size_buffers(layer, like_keys: torch.Tensor, like_values: torch.Tensor):
    """A static layer's own (B, H, max_cache_len, D) buffers, zeroed, allocated once: sized by the layer
    itself if it was never written, at its original size again if ``load`` released it."""
    if not getattr(layer, "is_initialized", True):
        layer.lazy_initialization(like_keys, like_values)  # allocates zeros at the layer's max_cache_len
    elif hasattr(layer, "_longspec_released_shape"):
        shape = layer.__dict__.pop("_longspec_released_shape")
        layer.keys, layer.values = like_keys.new_zeros(shape), like_values.new_zeros(shape)
    else:
        layer.keys.zero_()
        layer.values.zero_()
    return layer.keys, layer.values


class _PromptLayer(DynamicLayer):
    """A DynamicLayer whose growing keys/values are views of a preallocated buffer: ``update``
    writes the new entries in place instead of concatenating into a new tensor."""

    def __init__(self, key_buffer: torch.Tensor, value_buffer: torch.Tensor):
        super().__init__()
        self._key_buffer, self._value_buffer = key_buffer, value_buffer
        self.keys, self.values = key_buffer[:, :, :0], value_buffer[:, :, :0]
        self.device, self.dtype, self.is_initialized = key_buffer.device, key_buffer.dtype, True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        start = self.keys.shape[-2]
        end = start + key_states.shape[-2]
        if end > self._key_buffer.shape[-2]:
            raise ValueError(f"{end} prompt tokens do not fit the preallocated cache of {self._key_buffer.shape[-2]}")
        self._key_buffer[:, :, start:end].copy_(key_states)
        self._value_buffer[:, :, start:end].copy_(value_states)
        self.keys, self.values = self._key_buffer[:, :, :end], self._value_buffer[:, :, :end]
        return self.keys, self.values


def _release(layer) -> None:
    """Free a source cache layer's tensors (generate's prefill cache) after ``load`` copied them:
    keeping both would hold every row's KV twice for the whole call. ``export_to`` refills the layer
    at the end (a static layer at its original size)."""
    shape = tuple(layer.keys.shape)
    layer._longspec_released_shape = shape
    layer.keys = layer.keys.new_empty(shape[:2] + (0,) + shape[3:])  # still (B, H, S, D): it reads as empty
    layer.values = layer.values.new_empty(layer.keys.shape)
