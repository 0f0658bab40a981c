"""The LongSpec round on a tensor-parallel target against the TP vanilla step, for the Llama-3.1-8B
shape (random bf16 weights) on N GPUs. Launch with torchrun, one process per GPU:

    torchrun --nproc_per_node 2 benchmarks/tp_study.py --out DIR                 # 2 GPUs, 32k and 128k
    torchrun --nproc_per_node 2 benchmarks/tp_study.py --quick --out DIR         # CPU smoke run (gloo)

Rank 0 writes a random checkpoint once (``--checkpoint``); every rank loads it with
``from_pretrained(tp_plan="auto")``, so each holds its share of the heads, MLP columns and KV cache.
Per context length, measured the same way as benchmarks/scale_study.py (whose functions this reuses):
- the round: ``LongSpecDecoder`` with the default tree, captured as one CUDA graph per rank (the
  all-reduces of the target's row-parallel layers and of the draft's sharded cross-attention are
  captured with it), its parts (drafting, verification forward) timed alone;
- the vanilla step: ``generate(cache_implementation="static")`` on the same TP target, per token;
- the communication that decides how the draft reads a sharded cache: the all-reduce of the draft's
  cross-attention output per depth (what sharding its query heads costs) against an all-gather of
  one target layer's K/V at this context (what replicating the heads instead would move per round);
- bytes floors per rank: what each GPU must read / its measured copy bandwidth.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

sys.path.insert(0, str(Path(__file__).parent))
from scale_study import LLAMA_8B, TINY, cuda_time, round_costs, vanilla_step  # noqa: E402

from hf_longspec import LongSpecDraftModel  # noqa: E402
from hf_longspec.bench.machine import machine_info  # noqa: E402
from hf_longspec.bench.probes import copy_bandwidth  # noqa: E402
from hf_longspec.distributed_exit import exit_distributed_process  # noqa: E402
from hf_longspec.generation import TreeLayout  # noqa: E402


def write_random_checkpoint(folder: Path, shape: dict, dtype: torch.dtype, device) -> None:
    """A random model of ``shape`` saved once (rank 0): TP loading needs weights on disk."""
    if (folder / "config.json").exists():
        return
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(LlamaConfig(**shape))
    finally:
        torch.set_default_dtype(default)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    model.save_pretrained(folder)
    del model


def communication_costs(shard, config, length: int, nodes: int, device, repeats: int) -> dict:
    """All-reduce of one draft depth's cross-attention output vs all-gather of one layer's K/V."""
    head_dim = config.hidden_size // config.num_attention_heads
    partial = torch.randn(1, nodes, config.hidden_size, dtype=torch.bfloat16, device=device)
    local_kv = torch.randn(2, 1, config.num_key_value_heads // shard.world_size, length, head_dim,
                           dtype=torch.bfloat16, device=device)
    gathered = torch.empty((shard.world_size * local_kv.shape[0], *local_kv.shape[1:]), dtype=local_kv.dtype,
                           device=device)

    def reduce():
        torch.distributed.all_reduce(partial, group=shard.group)

    def gather():
        torch.distributed.all_gather_into_tensor(gathered, local_kv, group=shard.group)

    reduce(), gather()  # warm-up: the communicators are set up here
    return {"draft_allreduce_per_depth_ms": 1000 * statistics.median(cuda_time(reduce, repeats, device)),
            "layer_kv_allgather_ms": 1000 * statistics.median(cuda_time(gather, repeats, device)),
            "layer_kv_allgather_bytes": gathered.numel() * gathered.element_size()}


def floors_per_rank(config, draft, layout, length: int, bandwidth: float, world: int, itemsize: int = 2) -> dict:
    """Bytes each rank must read: its share of the target (weights, KV), the replicated draft, its
    share of the LM head (column-parallel) and of the cross-attended layer, per drafted depth."""
    head_dim = config.hidden_size // config.num_attention_heads
    weights = sum(p.numel() for p in draft.target.parameters()) * itemsize  # global numel of the shards
    kv = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * itemsize * length
    draft_weights = sum(p.numel() for p in draft.parameters()) * itemsize
    lm_head = config.vocab_size * config.hidden_size * itemsize
    cross_kv = 2 * config.num_key_value_heads * head_dim * itemsize * length
    vanilla = (weights + kv) / world
    draft_reads = layout.depth * (draft_weights + (lm_head + cross_kv) / world)
    return {"vanilla_floor_ms": 1000 * vanilla / bandwidth, "round_floor_ms": 1000 * (vanilla + draft_reads) / bandwidth}


def write_results(out: Path, device, shape: dict, world: int, layout, bandwidth: float, rows: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    result = {"machine": machine_info(device, sys.argv), "shape": shape, "tp_size": world,
              "tree": list(layout.widths), "copy_bandwidth_bytes_per_s": bandwidth, "rows": rows}
    (out / "tp_study.json").write_text(json.dumps(result, indent=1, default=str))
    lines = ["| context | TP | round (graph) | draft | verify fwd | vanilla static step | round / step | "
             "round / own floor | draft all-reduce per depth | layer K/V all-gather |", "|" + "---|" * 10]
    for r in rows:
        step = r.get("vanilla_static_step_ms")
        step_text = f"{step:.2f} ms" if step else r.get("vanilla_error", "-")
        ratio_text = f"{r['round_over_vanilla_step']:.2f}x" if step else "-"
        lines.append(
            f"| {r['context']} | {r['tp_size']} | {r['round_ms']:.2f} ms | {r['draft_ms']:.2f} | "
            f"{r['verify_forward_ms']:.2f} | {step_text} | {ratio_text} | {r['round_over_own_floor']:.2f}x | "
            f"{r.get('draft_allreduce_per_depth_ms', float('nan')):.3f} ms | "
            f"{r.get('layer_kv_allgather_ms', float('nan')):.2f} ms |")
    (out / "tp_study.md").write_text("\n".join(lines) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--contexts", type=int, nargs="+", default=None)
    parser.add_argument("--checkpoint", default="/tmp/tp_study_checkpoint")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--no-vanilla", action="store_true")
    parser.add_argument("--vanilla-repeats", type=int, default=3, help="1 at 128k: each call is mostly its prefill")
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available() and not args.quick
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(f"cuda:{local_rank}" if gpu else "cpu")
    if gpu:
        torch.cuda.set_device(device)
    shape = TINY if args.quick else LLAMA_8B
    contexts = args.contexts or ([256, 512] if args.quick else [32768, 131072 - 512])
    dtype = torch.bfloat16 if gpu else torch.float32
    checkpoint = Path(args.checkpoint + ("_quick" if args.quick else ""))
    rank = int(os.environ.get("RANK", 0))
    if rank == 0:
        begin = time.perf_counter()
        write_random_checkpoint(checkpoint, shape, dtype, device)
        print(f"checkpoint ready in {time.perf_counter() - begin:.0f} s", flush=True)
    if "RANK" in os.environ:
        if not torch.distributed.is_initialized():
            torch.distributed.init_process_group("nccl" if gpu else "gloo")
        torch.distributed.barrier()
    target = AutoModelForCausalLM.from_pretrained(checkpoint, dtype=dtype, tp_plan="auto").eval()
    target.generation_config.eos_token_id = None
    config = target.config
    torch.manual_seed(0)  # the same replicated draft on every rank
    draft = LongSpecDraftModel.from_target(target).eval()
    shard = draft._head_shard
    world = shard.world_size if shard is not None else 1
    layout = TreeLayout.plan(draft.config.tree_widths, draft.config.tree_max_nodes, config.vocab_size)
    bandwidth = copy_bandwidth(device)["bytes_per_s"]
    rows = []
    for length in contexts:
        row = {"context": length, "tp_size": world,
               **round_costs(target, draft, layout, length, args.repeats, device),
               **floors_per_rank(config, draft, layout, length, bandwidth, world)}
        if shard is not None:
            row.update(communication_costs(shard, config, length, max(layout.widths), device, args.repeats))
        if not args.no_vanilla:
            target.set_attn_implementation("sdpa")
            try:
                row.update(vanilla_step(target, length, device, repeats=args.vanilla_repeats))
                row["round_over_vanilla_step"] = row["round_ms"] / row["vanilla_static_step_ms"]
            except Exception as error:  # noqa: BLE001 - report the failure instead of losing the row
                row["vanilla_error"] = f"{type(error).__name__}: {str(error)[:300]}"
        row["round_over_own_floor"] = row["round_ms"] / row["round_floor_ms"]
        rows.append(row)
        if rank == 0:  # after every row: a run cut off by its time limit keeps what it measured
            print(json.dumps(row), flush=True)
            write_results(Path(args.out), device, shape, world, layout, bandwidth, rows)
    if "RANK" in os.environ:
        # compiled vanilla steps hold CUDA graphs with NCCL collectives: drop them first, or destroying the
        # process group hangs (pytorch/pytorch#115388)
        torch._dynamo.reset()
        gc.collect()
        exit_distributed_process(0)  # the TP mesh's groups outlive destroy_process_group: no finalization


if __name__ == "__main__":
    main()
