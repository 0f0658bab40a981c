"""``prefix_attn_splitkv``: unmasked attention of a few query rows over a long cached prefix, with LSE;
``cached_tree_attn``: the same launch plus the tree's own masked keys, the whole hybrid tree attention.

Why split the key axis: at tree-verification time there are only T (1..128) query rows per
head, so a kernel that gives each (batch, KV head) one program launches B*Hkv = 8 programs on a
132-SM GPU and reads 128k keys serially. Splitting the keys into chunks gives every SM work;
each chunk writes a float32 partial (out, lse) and a second tiny kernel merges the partials
exactly by log-sum-exp. For tree verification over a preallocated cache the tree's K/V sit right
after each row's prefix, so one more "split" attends them under the tree mask: prefix, tree and
their LSE merge are two launches per layer, with no gather of the tree's K/V. The GQA group is
folded into the query rows, so each KV head is read from memory once per row block, never copied
by ``repeat_kv``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._launch import (
    block_d_for,
    block_m_for,
    cdiv,
    check_attention_inputs,
    dot_in_fp32,
    grouped_view,
    launch_config,
    new_output,
    next_power_of_two,
)
from ._runtime import streaming_multiprocessor_count, triton_can_run_on

_MAX_ROW_TILE = 128
# Rows that need more than one 128-row tile are tiled by 64 when fewer than this many programs would
# share a key split (batch x KV heads x row blocks): on the H200 a SmolLM2 verification forward (1 x 3
# KV heads, 207 packed rows) took 2.16 ms with 64-row tiles against 2.35 ms with 128, while the
# Llama-3.1-8B shape (8 KV heads, 276 rows) took 15.66 ms against 13.26 (benchmarks/profile_round.py,
# "variants"). Rows that fit one 128-row tile keep it: every row tile reads the row's whole KV, and
# at 128k cached tokens 68 packed rows took 190 us per layer in one tile against 406 in two
# (benchmarks/attention_tiles.py, 2026-12-01).
_SMALL_LAUNCH_PROGRAMS = 16
# Programs per SM to aim for: more than one keeps loads in flight while another program computes.
_PROGRAMS_PER_SM = 2
# A split shorter than this spends more on its partial write and the merge than it saves.
MIN_KEYS_PER_SPLIT = 256
MAX_SPLITS = 128


def choose_num_splits(key_len: int, programs_per_split: int, sm_count: int) -> int:
    """How many key chunks to launch so that at most ``_PROGRAMS_PER_SM`` programs land on each SM.

    Rounded down: a few programs past full waves make a nearly empty last wave that costs a whole
    one (batch 4 x 8 KV heads at 32k: 9 splits, 288 programs on 264 slots, 213 us; 4 splits, 161 us).
    """
    if key_len <= 0:
        return 1
    wanted = max(1, (_PROGRAMS_PER_SM * sm_count) // max(1, programs_per_split))
    by_length = max(1, key_len // MIN_KEYS_PER_SPLIT)
    return max(1, min(wanted, by_length, MAX_SPLITS))


class Tiles(NamedTuple):
    """A launch's tiling, to override the default policy (benchmarks/attention_tiles.py sweeps it)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


class SplitPlan(NamedTuple):
    """How a split-KV launch tiles the work (exposed for benchmarks and logs)."""

    block_m: int
    block_n: int
    row_blocks: int
    num_splits: int
    keys_per_split: int
    num_warps: int
    num_stages: int


def plan_splits(
    batch: int, num_q_heads: int, num_kv_heads: int, query_len: int, key_len: int, head_dim: int,
    dtype: torch.dtype, device: torch.device | str, num_splits: int | None = None, tiles: Tiles | None = None,
) -> SplitPlan:
    """Tiles and key chunks for :func:`prefix_attn_splitkv` on this shape and device (``tiles``: a
    benchmark's override of :func:`default_tiles`)."""
    packed_rows = (num_q_heads // num_kv_heads) * query_len
    tiles = tiles or default_tiles(batch, num_kv_heads, packed_rows, dtype, block_d_for(head_dim))
    row_blocks = cdiv(packed_rows, tiles.block_m)
    if num_splits is None:
        num_splits = choose_num_splits(key_len, row_blocks * batch * num_kv_heads,
                                       streaming_multiprocessor_count(device))
    keys_per_split = cdiv(cdiv(max(key_len, 1), max(1, num_splits)), tiles.block_n) * tiles.block_n
    return SplitPlan(tiles.block_m, tiles.block_n, row_blocks, cdiv(max(key_len, 1), keys_per_split), keys_per_split,
                     tiles.num_warps, tiles.num_stages)


def default_tiles(batch: int, num_kv_heads: int, packed_rows: int, dtype: torch.dtype, block_d: int) -> Tiles:
    """The split kernel's tiling: the smallest power-of-two row tile that holds the packed rows (64 for
    small launches of more than one 128-row tile), then key block, warps and stages for it."""
    # fp32 or D > 128 tiles are twice as wide: half the rows keep shared memory under ~140 KB.
    wide = dtype == torch.float32 or block_d > 128
    block_m = block_m_for(packed_rows, _MAX_ROW_TILE // 2 if wide else _MAX_ROW_TILE)
    if packed_rows > 128 and batch * num_kv_heads * cdiv(packed_rows, block_m) < _SMALL_LAUNCH_PROGRAMS:
        block_m = 64
    block_n, num_warps, num_stages = launch_config(dtype, block_d, block_m)
    if block_d == 128 and block_m <= 64 and not wide:
        # on the H200 (Llama-3.1-8B shape, bf16) 36-64 packed rows against 128k keys took 145-150 us
        # per layer with 32-key blocks against 161-163 with 64, and 4 rows of 64 against 32k 159
        # against 217; it lost on two other shapes (benchmarks/attention_tiles.py, 2026-12-01)
        block_n = 32
    return Tiles(block_m, block_n, num_warps, num_stages)


def _check_seqlens(seqlens, batch: int, device) -> None:
    if seqlens is not None and (seqlens.shape != (batch,) or seqlens.device != device or seqlens.is_floating_point()):
        raise ValueError(f"seqlens must be an integer ({batch},) tensor on {device}; got {tuple(seqlens.shape)} "
                         f"{seqlens.dtype} on {seqlens.device}")


def _check_window(window) -> None:
    if window is not None and (len(window) != 2 or any(isinstance(n, bool) or not isinstance(n, int) for n in window)
                               or window[0] < 0 or window[1] < 1):
        raise ValueError(f"window must be (anchors >= 0, newest >= 1) ints; got {window!r}")


def _outputs(q: torch.Tensor, out: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The (B, Hq, T, D) output (given: checked; of q's dtype or float32) and the float32 (B, Hq, T) lse."""
    if out is None:
        out = new_output(tuple(q.shape), q.dtype, q.device)
    elif out.shape != q.shape or out.dtype not in (q.dtype, torch.float32):
        raise ValueError(f"out must be {tuple(q.shape)} of {q.dtype} or float32; got {tuple(out.shape)} of {out.dtype}")
    return out, new_output(tuple(q.shape[:3]), torch.float32, q.device)


def _split_and_combine(q, k, v, out, lse, scale, num_splits, seqlens, mask=None, tiles=None, window=None) -> None:
    """Launch the split kernel over ``k``'s first ``key_len`` slots (plus the tree split when ``mask``
    is given: T tree keys after each row's ``seqlens``; only the anchors and newest keys of each row when
    ``window`` is), then merge the partials into out/lse."""
    from ._attention_core import LOG2E
    from ._prefix_splitkv_kernel import combine_splits_kernel, split_attention_kernel

    batch, num_q_heads, query_len, head_dim = q.shape
    num_kv_heads = k.shape[1]
    key_len = k.shape[2] - (query_len if mask is not None else 0)  # slots a prefix may fill
    packed_rows = (num_q_heads // num_kv_heads) * query_len
    block_d = block_d_for(head_dim)
    anchors, newest = window or (0, 0)
    keys_read = min(key_len, anchors + newest) if window else key_len  # the most any row reads
    plan = plan_splits(batch, num_q_heads, num_kv_heads, query_len, keys_read, head_dim, q.dtype, q.device, num_splits,
                       tiles)
    block_m, block_n, row_blocks, num_splits, keys_per_split, num_warps, num_stages = plan
    launched = num_splits + (1 if mask is not None else 0)

    q5, o5, l4 = (grouped_view(t, num_kv_heads) for t in (q, out, lse))
    if launched == 1:
        part_out, part_lse = o5.unsqueeze(0), l4.unsqueeze(0)
    else:
        part_out = new_output((launched, *o5.shape), torch.float32, q.device)
        part_lse = new_output((launched, *l4.shape), torch.float32, q.device)
    mask_strides = (mask.stride(0) if mask.shape[0] > 1 else 0, mask.stride(1), mask.stride(2)) if mask is not None \
        else (0, 0, 0)
    split_attention_kernel[(row_blocks, batch * num_kv_heads, launched)](
        q5, k, v, part_out, part_lse, seqlens if seqlens is not None else lse, mask if mask is not None else lse,
        *q5.stride(), *k.stride(), *v.stride(), *part_out.stride(), *part_lse.stride(), *mask_strides,
        num_kv_heads, query_len, key_len, packed_rows, keys_per_split, num_splits if mask is not None else launched,
        scale * LOG2E, anchors, newest,
        HAS_SEQLENS=seqlens is not None,
        HAS_WINDOW=window is not None,
        DOT_IN_FP32=dot_in_fp32(q.dtype, q.device),
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_D=block_d, HEAD_DIM=head_dim,
        num_warps=num_warps, num_stages=num_stages,
    )
    if launched > 1:
        block_s = min(next_power_of_two(launched), 64 if block_d <= 64 else 32)
        combine_splits_kernel[(packed_rows, batch * num_kv_heads)](
            part_out, part_lse, o5, l4,
            *part_out.stride(), *part_lse.stride(), *o5.stride(), *l4.stride(),
            num_kv_heads, query_len, launched,
            BLOCK_S=block_s, BLOCK_D=block_d, HEAD_DIM=head_dim,
            num_warps=4,
        )


def prefix_attn_splitkv(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float | None = None,
    *,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    seqlens: torch.Tensor | None = None,
    tiles: Tiles | None = None,
    window: tuple[int, int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every query row attends every (valid) key; returns ``(out, lse)``.

    Args:
        q: (B, Hq, T, D) queries (any strides).
        k, v: (B, Hkv, S, D) cached keys and values (any strides, may differ); Hq % Hkv == 0.
        scale: softmax scale, default ``D ** -0.5``.
        num_splits: force the number of key chunks (default: from S and the SM count).
        out: optional (B, Hq, T, D) tensor to write into, of q's dtype or float32 (float32 keeps
            the result unrounded for a later merge).
        seqlens: optional (B,) integer device tensor: row b attends only keys [0, seqlens[b]) of a
            preallocated k/v of capacity S. Read by the kernel from memory, never by the host, so
            the launch (and a CUDA graph holding it) is the same for every length.
        tiles: override the launch's tiling (benchmarks; default: the shape's policy).
        window: optional (anchors, newest): row b reads only keys [0, anchors) and the newest ``newest``
            of its [0, seqlens[b]) (all of them when there are no more than anchors + newest). The
            launch covers anchors + newest keys whatever the lengths, and nothing is copied.

    Returns:
        out (B, Hq, T, D) in q's dtype (or ``out``'s) and lse (B, Hq, T) float32, natural log.
        With S = 0 every row gets out = 0 and lse = -inf.
    """
    check_attention_inputs(q, k, v)
    batch, num_q_heads, query_len, head_dim = q.shape
    if not triton_can_run_on(q.device):
        raise RuntimeError(
            f"prefix_attn_splitkv needs Triton on CUDA, or TRITON_INTERPRET=1 for CPU tensors (device {q.device})"
        )
    scale = head_dim**-0.5 if scale is None else float(scale)
    out, lse = _outputs(q, out)
    _check_seqlens(seqlens, batch, q.device)
    _check_window(window)
    if out.numel() == 0 or k.shape[2] == 0:
        out.zero_()
        lse.fill_(float("-inf"))
        return out, lse
    _split_and_combine(q, k, v, out, lse, scale, num_splits, seqlens, tiles=tiles, window=window)
    return out, lse


def cached_tree_attn(
    q: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    tree_mask: torch.Tensor,
    seqlens: torch.Tensor,
    scale: float | None = None,
    *,
    num_splits: int | None = None,
    out: torch.Tensor | None = None,
    tiles: Tiles | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Hybrid tree attention over a preallocated cache: prefix, tree and their merge in two launches.

    Args:
        q: (B, Hq, T, D) queries of the T tree tokens (any strides).
        k_buffer, v_buffer: (B, Hkv, C, D) cache buffers: row b's committed prefix in slots
            [0, seqlens[b]) and the tree tokens' own K/V in [seqlens[b], seqlens[b] + T).
        tree_mask: bool (T, T) or (B, T, T), True = the query row may attend the tree key column
            (ancestor-or-self); every row attends its whole prefix.
        seqlens: (B,) integer device tensor of prefix lengths, read by the kernel (graph-safe).
        out: optional (B, Hq, T, D) tensor of q's dtype or float32 to write into (any strides).
        tiles: override the launch's tiling (benchmarks; default: the shape's policy).

    Returns:
        out (B, Hq, T, D) and lse (B, Hq, T) float32 over prefix and tree together.
    """
    from .fused_mask_attn import _batched_mask

    check_attention_inputs(q, k_buffer, v_buffer)
    batch, num_q_heads, tree_len, head_dim = q.shape
    if not triton_can_run_on(q.device):
        raise RuntimeError(f"cached_tree_attn needs Triton on CUDA, or TRITON_INTERPRET=1 (device {q.device})")
    if k_buffer.shape[2] < tree_len:
        raise ValueError(f"a cache of capacity {k_buffer.shape[2]} cannot hold a {tree_len}-token tree")
    if seqlens is None:
        raise ValueError("cached_tree_attn needs seqlens: the tree's K/V sit after each row's prefix")
    _check_seqlens(seqlens, batch, q.device)
    mask = _batched_mask(tree_mask, batch, tree_len, q.device)
    scale = head_dim**-0.5 if scale is None else float(scale)
    out, lse = _outputs(q, out)
    if out.numel() == 0:
        lse.fill_(float("-inf"))
        return out, lse
    _split_and_combine(q, k_buffer, v_buffer, out, lse, scale, num_splits, seqlens, mask, tiles)
    return out, lse
