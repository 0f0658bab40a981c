"""What one captured LongSpec round costs against one compiled static-cache vanilla step, at 8k /
32k / 128k cached tokens, for the Llama-3.1-8B shape (random bf16 weights: only cost matters here).

    PYTHONPATH=src python benchmarks/scale_study.py --out DIR            # H200
    PYTHONPATH=src python benchmarks/scale_study.py --quick --out DIR    # tiny CPU smoke run

Per context length L, on one GPU:
- LongSpec round: ``LongSpecDecoder`` (the object generate() uses) with the tree generate() drafts for
  the batch and context (the default 4-16-16-16-16, or the largest ladder tree within the node budget
  of generation/tree_budget.py: ``tree_batch_nodes // B``, and fewer nodes as the context grows),
  its target cache filled with random K/V up to L (no prefill needed to time a round), replayed as
  ONE CUDA graph: draft tree -> verification forward (hybrid tree attention) -> greedy accept ->
  commit. The draft phase and the verification forward are also captured and timed alone, so
  the parts can be checked against the whole.
- vanilla step: what a user gets from ``generate(..., cache_implementation="static")`` (transformers
  compiles the step with CUDA graphs): (time of 33 new tokens - time of 1 new token) / 32, on an
  L-token random prompt. Its first call (compile) is timed separately.
- bytes floors: what each must read / copy bandwidth measured in the same run. The round's floor
  counts the target's weights and KV once, plus the draft's weights, its LM-head read per drafted
  depth and its cross-attention read of one target layer per depth.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from hf_longspec import LongSpecDraftModel
from hf_longspec.attention import use_hybrid_attention
from hf_longspec.bench.machine import machine_info
from hf_longspec.bench.probes import copy_bandwidth
from hf_longspec.generation import LongSpecDecoder, TreeLayout
from hf_longspec.generation.decoder import bucketed_capacity
from hf_longspec.generation.roofline import latency_bound, read_bytes
from hf_longspec.generation.tree_budget import node_budget, tree_within

LLAMA_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=131072, rope_theta=500000.0)
TINY = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, max_position_embeddings=4096)


def cuda_time(fn, repeats: int, device) -> list[float]:
    """Seconds per call of fn, one sample per call (CUDA events on GPU, wall clock elsewhere)."""
    samples = []
    for _ in range(repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1000)
        else:
            begin = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - begin)
    return samples


def capture(fn, device):
    """fn captured as a CUDA graph (after one warm-up run); on the CPU, fn itself."""
    if device.type != "cuda":
        return fn
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def random_target(shape: dict, device, dtype):
    """A random Llama of ``shape`` (only cost matters), that never stops at an eos. Built in ``dtype``, as
    from_pretrained(dtype=) loads one: a .to(dtype) cast would round its RoPE frequencies (bind warns)."""
    torch.manual_seed(0)
    with torch.device(device):
        target = LlamaForCausalLM._from_config(LlamaConfig(**shape), dtype=dtype).eval()
    target.generation_config.eos_token_id = None
    target.generation_config.pad_token_id = 0
    return target


def filled_decoder(target, draft, layout, length: int, device, batch: int = 1, compile: bool = False,
                   compile_verify: bool | None = None, **decoder_options):
    """The decoder generate() would build, its target cache filled with random K/V up to ``length`` and
    the draft's ring started on random tokens: a round can run without any prefill. ``decoder_options``:
    more of LongSpecDecoder's arguments (``sampling``, ``warpers``)."""
    use_hybrid_attention(target)  # the vanilla runs switched it back to plain sdpa
    decoder = LongSpecDecoder(draft, layout, bucketed_capacity(length + 512, layout), batch_size=batch,
                              compile=compile, compile_verify=compile_verify, **decoder_options)
    with torch.no_grad():
        decoder.cache.storage.normal_(0, 0.5)
        decoder.cache.lengths.fill_(length)
        ids = torch.randint(0, target.config.vocab_size, (batch, length), device=device)
        draft.start(ids, ring=decoder.context.ring)
        decoder.root_tokens.fill_(1)
    return decoder


def phase_replay_ms(decoder, length: int, repeats: int, device) -> dict:
    """Median time of the draft phase, the verification forward and a whole round, each captured alone as
    a CUDA graph and replayed (eager wall time on the CPU), every repetition at the same context."""
    def whole_round():
        decoder.cache.lengths.fill_(length)
        decoder.round()

    results = {}
    for name, fn in (("draft", decoder._draft_greedy), ("verify_forward", decoder._verify), ("round", whole_round)):
        decoder.cache.lengths.fill_(length)
        replay = capture(torch.no_grad()(fn), device)
        results[f"{name}_ms"] = 1000 * statistics.median(cuda_time(replay, repeats, device))
    decoder.cache.lengths.fill_(length)
    return results


def round_costs(target, draft, layout, length: int, repeats: int, device, compile: bool = False,
                compile_verify: bool | None = None, batch: int = 1) -> dict:
    decoder = filled_decoder(target, draft, layout, length, device, batch, compile, compile_verify)
    results = phase_replay_ms(decoder, length, repeats, device)
    results["draft_plus_verify_ms"] = results["draft_ms"] + results["verify_forward_ms"]
    results["accept_commit_rest_ms"] = results["round_ms"] - results["draft_plus_verify_ms"]
    results["target_cache_bytes"] = decoder.cache.nbytes
    results["draft_state_bytes"] = decoder.context.ring.nbytes + decoder.context.tree_keys.nbytes * 2
    return results  # the decoder and its graphs are freed with this frame


def vanilla_step(target, length: int, device, batch: int = 1, repeats: int = 3) -> dict:
    """generate(cache_implementation="static"): per-token time from a 33- and a 1-token call.

    Every call uses one cache size (``max_cache_len``), so the step compiled by the first call is the
    one timed: a cache sized per call recompiles whenever max_new_tokens grows. Each call length is
    run once untimed, then `repeats` times; medians. (At a large batch each call is mostly its
    prefill, so fewer repeats keep a batch of 16 at 32k within a device call.)"""
    ids = torch.randint(0, target.config.vocab_size, (batch, length), device=device)
    # A fresh compile per (context, batch), as a user serving one shape gets it: without the reset
    # dynamo compiles the second shape with dynamic sizes, a slower step (the 8k step read 16.53 ms
    # compiled after 32k on 2026-12-01, 10.53 ms compiled first in that day's earlier run)
    torch._dynamo.reset()

    def call(new):
        if device.type == "cuda":
            torch.cuda.synchronize()
        begin = time.perf_counter()
        target.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                        cache_implementation="static", max_cache_len=length + 64)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - begin

    first = call(33)  # compiles the step for this cache size
    call(1)
    one = statistics.median(call(1) for _ in range(repeats))
    many = statistics.median(call(33) for _ in range(repeats))
    return {"vanilla_static_step_ms": 1000 * (many - one) / 32, "vanilla_first_call_s": first}


def floors(config, draft, layout, length: int, bandwidth: float, batch: int = 1) -> dict:
    """Bytes floors: vanilla's step reads the weights and the KV once (roofline.read_bytes, the model
    the node budget uses); a round adds, per drafted depth, the draft, its LM head and its
    cross-attended target layer."""
    itemsize = next(draft.target.parameters()).element_size()
    head_dim = config.hidden_size // config.num_attention_heads
    draft_weights = sum(p.numel() for p in draft.parameters()) * itemsize
    lm_head = config.vocab_size * config.hidden_size * itemsize
    cross_kv = 2 * config.num_key_value_heads * head_dim * itemsize * length * batch
    vanilla = read_bytes(draft.target, length, batch)
    draft_reads = layout.depth * (draft_weights + lm_head + cross_kv)
    return {"vanilla_floor_ms": 1000 * vanilla / bandwidth, "round_floor_ms": 1000 * (vanilla + draft_reads) / bandwidth,
            "draft_share_of_round_floor": draft_reads / (vanilla + draft_reads),
            "draft_lm_head_bytes_per_round": layout.depth * lm_head}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--contexts", type=int, nargs="+", default=None)
    parser.add_argument("--vanilla-contexts", type=int, nargs="+", default=None,
                        help="contexts at which to time the compiled vanilla step (default: all)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--vanilla-repeats", type=int, default=3)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1],
                        help="rows per round / step (the batch issue: 1 4 8 16 at 32k)")
    parser.add_argument("--compile-contexts", type=int, nargs="*", default=[],
                        help="contexts at which the round is also timed with torch.compile (compile costs minutes): "
                             "all of it, and (for a bytes-bound target) the drafting alone, as generate() does")
    parser.add_argument("--trees", nargs="*", default=[],
                        help="more tree shapes to time at batch 1, widths joined by '-' (4-16-12 2-4-4-3-3)")
    args = parser.parse_args(argv)
    device = torch.device("cpu" if args.quick or not torch.cuda.is_available() else "cuda")
    shape = TINY if args.quick else LLAMA_8B
    contexts = args.contexts or ([256, 512] if args.quick else [8192, 32768, 131072 - 512])
    vanilla_contexts = args.vanilla_contexts if args.vanilla_contexts is not None else contexts
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    target = random_target(shape, device, dtype)
    config = target.config
    draft = LongSpecDraftModel.from_target(target).eval()
    bandwidth = copy_bandwidth(device)["bytes_per_s"]
    rows = []
    for length in contexts:
        for batch in args.batch_sizes:
            # the tree generate() drafts for this batch and context (generation/tree_budget.py)
            layout = tree_within(draft.config, node_budget(draft.config, target, batch, length), config.vocab_size)
            row = {"context": length, "batch": batch, "tree_widths": list(layout.widths),
                   **round_costs(target, draft, layout, length, args.repeats, device, batch=batch),
                   **floors(config, draft, layout, length, bandwidth, batch=batch)}
            if length in vanilla_contexts:
                target.set_attn_implementation("sdpa")
                try:
                    row.update(vanilla_step(target, length, device, batch, args.vanilla_repeats))
                    row["round_over_vanilla_step"] = row["round_ms"] / row["vanilla_static_step_ms"]
                except torch.OutOfMemoryError as error:  # vanilla's prefill builds a (B, 1, L, L) mask
                    row["vanilla_error"] = f"out of memory: {str(error).splitlines()[0]}"
                    torch.cuda.empty_cache()
            row["round_over_own_floor"] = row["round_ms"] / row["round_floor_ms"]
            if length in args.compile_contexts and batch == 1:
                begin = time.perf_counter()
                compiled = round_costs(target, draft, layout, length, args.repeats, device, compile=True)
                row["compiled"] = {**compiled, "setup_and_compile_s": time.perf_counter() - begin}
                if not latency_bound(target, length, batch):  # what generate() does by default: the drafting alone
                    begin = time.perf_counter()
                    mixed = round_costs(target, draft, layout, length, args.repeats, device, compile=True,
                                        compile_verify=False)
                    row["draft_compiled"] = {**mixed, "setup_and_compile_s": time.perf_counter() - begin}
            rows.append(row)
            print(json.dumps(row), flush=True)
            table = write_results(Path(args.out), device, shape, draft.config.tree_widths, bandwidth, rows)  # a cut-off run keeps its rows
        for spec in args.trees:  # the same context, other trees: what a node costs as the context grows
            other = TreeLayout.plan([int(w) for w in spec.split("-")], None, config.vocab_size)
            row = {"context": length, "batch": 1, "tree_widths": list(other.widths),
                   **round_costs(target, draft, other, length, args.repeats, device),
                   **floors(config, draft, other, length, bandwidth)}
            row["round_over_own_floor"] = row["round_ms"] / row["round_floor_ms"]
            rows.append(row)
            print(json.dumps(row), flush=True)
            table = write_results(Path(args.out), device, shape, draft.config.tree_widths, bandwidth, rows)
    print(table)


def write_results(out: Path, device, shape: dict, draft_tree, bandwidth: float, rows: list[dict]) -> str:
    """JSON and markdown of the rows so far; "tree" is the draft's own tree (each row names its tree)."""
    result = {"machine": machine_info(device, sys.argv), "shape": shape, "tree": list(draft_tree),
              "copy_bandwidth_bytes_per_s": bandwidth, "rows": rows}
    out.mkdir(parents=True, exist_ok=True)
    (out / "scale_study.json").write_text(json.dumps(result, indent=1, default=str))
    header = ("| context | batch | tree | round (graph) | draft | verify fwd | accept+commit | vanilla static step | round / step "
              "| round floor | round / floor | vanilla floor | draft share of floor |")
    lines = [header, "|" + "---|" * 13]
    for r in rows:
        step = r.get("vanilla_static_step_ms")
        step_text = f"{step:.2f} ms" if step else ("out of memory" if "vanilla_error" in r else "-")
        ratio_text = f"{r['round_over_vanilla_step']:.2f}x" if step else "-"
        lines.append(
            f"| {r['context']} | {r['batch']} | {'-'.join(map(str, r['tree_widths']))} | {r['round_ms']:.2f} ms | {r['draft_ms']:.2f} | {r['verify_forward_ms']:.2f} | "
            f"{r['accept_commit_rest_ms']:.2f} | {step_text} | {ratio_text} | {r['round_floor_ms']:.2f} ms | "
            f"{r['round_over_own_floor']:.2f}x | {r['vanilla_floor_ms']:.2f} ms | {r['draft_share_of_round_floor']:.0%} |")
    table = "\n".join(lines)
    (out / "scale_study.md").write_text(table + "\n")
    return table

if __name__ == "__main__":
    main()
