"""Tensor-parallel targets (transformers' ``tp_plan="auto"``): which attention heads this rank holds.

Under tensor parallelism each rank's KV cache holds only its slice of the target's KV heads (the
k/v projections are split by output column, in contiguous blocks). The draft's cross-attention
reads that cache where it lies, so it computes only the query heads that attend to the rank's KV
heads: the rows of ``q_proj`` and the columns of ``o_proj`` of those heads, followed by one
all-reduce of the (tokens, hidden) output, the way the target's own attention is sharded. The rest
of the draft (its sliding-window self-attention, MLP, norms) is small and runs replicated, so every
rank drafts the same tree.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .errors import UnsupportedTargetError


@dataclass(frozen=True)
class HeadShard:
    """This rank's place in the target's tensor-parallel group."""

    rank: int
    world_size: int
    group: object  # torch.distributed ProcessGroup

    def head_range(self, num_heads: int) -> tuple[int, int]:
        """The contiguous block [start, stop) of ``num_heads`` heads that this rank computes."""
        per_rank = num_heads // self.world_size
        return self.rank * per_rank, (self.rank + 1) * per_rank

    def local_heads(self, num_heads: int) -> int:
        return num_heads // self.world_size

    def share_random_state(self, device: torch.device) -> None:
        """Give every rank rank 0's random state. Sampling draws (the first token, the draft's Gumbel
        keys, the acceptance uniforms) must agree on every rank: ranks that accepted different paths
        would run different numbers of rounds, and their collectives would fall out of step."""
        source = torch.distributed.get_global_rank(self.group, 0)
        if device.type == "cuda":
            state = torch.cuda.get_rng_state(device).to(device)
            torch.distributed.broadcast(state, src=source, group=self.group)
            torch.cuda.set_rng_state(state.cpu(), device)
        else:
            state = torch.get_rng_state()
            torch.distributed.broadcast(state, src=source, group=self.group)
            torch.set_rng_state(state)

    def smallest(self, value: int, device: torch.device) -> int:
        """The smallest of the ranks' ``value``s: what every rank must agree on before a round (each
        rank's node budget reads its own shard's weight bytes, which need not be equal)."""
        agreed = torch.tensor([value], device=device)
        torch.distributed.all_reduce(agreed, op=torch.distributed.ReduceOp.MIN, group=self.group)
        return int(agreed.item())

    def all_reduce(self, partial: torch.Tensor) -> torch.Tensor:
        """Sum the ranks' partial outputs (in place; NCCL collectives can be captured in CUDA graphs)."""
        torch.distributed.all_reduce(partial, group=self.group)
        return partial


def target_head_shard(target) -> HeadShard | None:
    """The rank's head shard of a target loaded with ``tp_plan``; None for a target on one device."""
    world_size = getattr(target, "tp_size", None)
    if world_size in (None, 1):
        return None
    mesh = getattr(target, "_device_mesh", None) or getattr(target, "device_mesh", None)
    if mesh is None:
        raise UnsupportedTargetError(
            f"The target reports tp_size={world_size} but exposes no device mesh; load it with "
            "from_pretrained(..., tp_plan='auto') under torchrun."
        )
    group = mesh.get_group() if mesh.ndim == 1 else mesh.get_group("tp")
    return HeadShard(torch.distributed.get_rank(group), world_size, group)


def check_shardable(config, shard: HeadShard) -> None:
    """The draft mirrors the target's heads; both head counts must split evenly over the ranks."""
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    if heads % shard.world_size or kv_heads % shard.world_size:
        raise UnsupportedTargetError(
            f"tensor parallelism over {shard.world_size} ranks needs head counts divisible by {shard.world_size}; "
            f"the target has {heads} query and {kv_heads} KV heads. Allowed: a tp_size dividing both."
        )
