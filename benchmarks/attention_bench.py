"""Per-layer tree-verification attention on the GPU: HF eager / sdpa with a 4D mask vs hybrid tree attention.

Shape: Llama-3.1-8B attention (32 query heads, 8 KV heads, head dim 128, bf16, batch 1), trees of
16/64/128 nodes over cached contexts of 8k/32k/128k tokens. In one run it measures

- transformers' ``eager_attention_forward`` and ``sdpa_attention_forward`` given the 4D tree mask
  (B, 1, T, S + T), the way a model verifies a tree with stock attention;
- our ``longspec_attention_forward`` (prefix + tree + LSE merge) with each available prefix
  backend, and the parts alone (prefix only, ``fused_mask_attn`` only);
- the machine: device-to-device copy bandwidth and the bf16 matmul rate, giving a floor per
  shape = max(K/V bytes read once / bandwidth, attention FLOPs / matmul rate).

Every variant is checked against a float32 reference before it is timed. Timing is
``triton.testing.do_bench`` (median, with warmup; it flushes L2 between repetitions), rotating
over several random input sets when one set would fit in L2.

    PYTHONPATH=src python benchmarks/attention_bench.py [--out results.json]
    PYTHONPATH=src python benchmarks/attention_bench.py --quick      # tiny CPU smoke run (Triton interpreter)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny shapes; runs on the CPU via TRITON_INTERPRET")
    parser.add_argument("--out", default=None, help="JSON path (default: $OUT/attention_bench.json when OUT is set)")
    parser.add_argument("--contexts", type=int, nargs="*", default=None, help="cached context lengths S")
    parser.add_argument("--trees", type=int, nargs="*", default=None, help="tree sizes T")
    parser.add_argument("--eager-limit-gb", type=float, default=40.0, help="skip eager above this much memory")
    return parser.parse_args(argv)


ARGS = parse_args()

import torch  # noqa: E402  (torch does not import triton)

if "TRITON_INTERPRET" not in os.environ and not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton: kernels run on the CPU

try:
    import hf_longspec  # noqa: F401
except ImportError:  # run from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402
from transformers.models.llama.modeling_llama import eager_attention_forward  # noqa: E402

from hf_longspec.attention import (  # noqa: E402
    PREFIX_BACKENDS,
    longspec_attention_forward,
    prefix_attention,
    prefix_backend_available,
    set_prefix_backend,
)
from hf_longspec.bench.kernel_timing import median_time_us  # noqa: E402
from hf_longspec.testing import random_tree_mask  # noqa: E402
from hf_longspec.kernels import fused_mask_attn, plan_splits, triton_can_run_on  # noqa: E402
from hf_longspec.kernels._runtime import streaming_multiprocessor_count  # noqa: E402


@dataclass
class Shape:
    num_q_heads: int = 32
    num_kv_heads: int = 8
    head_dim: int = 128
    batch: int = 1
    dtype: torch.dtype = torch.bfloat16


@dataclass
class Result:
    context: int
    tree: int
    floor_us: float
    floor_kind: str
    times_us: dict = field(default_factory=dict)
    rel_err: dict = field(default_factory=dict)
    lse_err: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    splitkv_num_splits: int | None = None


class AttentionModule(torch.nn.Module):
    """What transformers' attention functions read from the attention layer."""

    def __init__(self, shape: Shape):
        super().__init__()
        self.num_key_value_groups = shape.num_q_heads // shape.num_kv_heads
        self.scaling = shape.head_dim**-0.5
        self.is_causal = True
        self.layer_idx = 0


# ---------------------------------------------------------------- timing and the machine

def measure_machine(device: torch.device, quick: bool) -> dict:
    """Copy bandwidth (bytes read + written per second) and the bf16 matmul rate (FLOP/s)."""
    numel = (1 << 20) if quick else (1 << 30)  # 2 GiB of bf16 on the GPU
    src = torch.randn(numel, device=device).to(torch.bfloat16) if quick else torch.empty(
        numel, dtype=torch.bfloat16, device=device).normal_()
    dst = torch.empty_like(src)
    copy_us = median_time_us(lambda: dst.copy_(src), device)
    n = 256 if quick else 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    matmul_us = median_time_us(lambda: a @ b, device)
    del src, dst, a, b
    return {
        "copy_bytes_per_s": 2 * numel * 2 / (copy_us * 1e-6),
        "matmul_flop_per_s": 2 * n**3 / (matmul_us * 1e-6),
        "matmul_n": n,
    }


def floor_us(shape: Shape, context: int, tree: int, machine: dict) -> tuple[float, str]:
    keys = context + tree
    kv_bytes = 2 * shape.batch * shape.num_kv_heads * keys * shape.head_dim * shape.dtype.itemsize
    flops = 4 * shape.batch * shape.num_q_heads * tree * keys * shape.head_dim
    by_bytes = kv_bytes / machine["copy_bytes_per_s"] * 1e6
    by_flops = flops / machine["matmul_flop_per_s"] * 1e6
    return (by_bytes, "bytes") if by_bytes >= by_flops else (by_flops, "FLOPs")


# ---------------------------------------------------------------- inputs and references

def make_inputs(shape: Shape, context: int, tree: int, device: torch.device, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    b, hq, hkv, d = shape.batch, shape.num_q_heads, shape.num_kv_heads, shape.head_dim
    # q as a model produces it: (B, T, Hq, D) projected, viewed as (B, Hq, T, D).
    query = torch.randn(b, tree, hq, d, device=device, dtype=shape.dtype).transpose(1, 2)
    key = torch.randn(b, hkv, context + tree, d, device=device, dtype=shape.dtype)
    value = torch.randn(b, hkv, context + tree, d, device=device, dtype=shape.dtype)
    tree_mask = random_tree_mask(tree, generator).to(device)
    allowed = torch.cat([torch.ones(tree, context, dtype=torch.bool, device=device), tree_mask], dim=1)
    additive = torch.zeros(b, 1, tree, context + tree, device=device, dtype=shape.dtype)
    additive.masked_fill_(~allowed, torch.finfo(shape.dtype).min)
    return {
        "query": query, "key": key, "value": value, "tree_mask": tree_mask,
        "mask_bool": allowed.expand(b, 1, tree, context + tree), "mask_additive": additive,
        "placeholder": torch.ones(b, 1, tree, tree, dtype=torch.bool, device=device),
    }


def reference(query, key, value, scale, allowed=None):
    """float32 attention with repeat_kv: out (B, Hq, T, D), lse (B, Hq, T)."""
    group = query.shape[1] // key.shape[1]
    keys = key.float().repeat_interleave(group, dim=1)
    scores = query.float() @ keys.transpose(-1, -2) * scale
    del keys
    if allowed is not None:
        scores.masked_fill_(~allowed, float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    probs = torch.softmax(scores, dim=-1)
    del scores
    return probs @ value.float().repeat_interleave(group, dim=1), lse


def relative_error(out, ref) -> float:
    out = out.float()
    if not torch.isfinite(out).all():
        return float("nan")
    return ((out - ref).norm() / ref.norm()).item()


# ---------------------------------------------------------------- the variants

def prefix_backends_here(device: torch.device, dtype: torch.dtype) -> list[str]:
    """Prefix backends worth timing here (math only where nothing else runs: the CPU)."""
    names = [n for n in PREFIX_BACKENDS if n != "math" and prefix_backend_available(n, device, dtype)]
    return names + ["math"] if device.type == "cpu" else names


def build_variants(shape: Shape, context: int, tree: int, device: torch.device, eager_limit_gb: float):
    """name -> (part, prefix backend or None, fn(inputs) -> (out (B, Hq, T, D), lse or None)).

    part says which reference applies: "full" (prefix + tree), "prefix" or "tree".
    """
    module = AttentionModule(shape).eval()
    scale = module.scaling
    variants, skipped = {}, {}

    keys = context + tree
    eager_bytes = (2 * shape.num_q_heads * keys * shape.head_dim * 2
                   + shape.batch * shape.num_q_heads * tree * keys * (2 + 2 + 4 + 2))
    if eager_bytes / 1e9 <= eager_limit_gb:
        variants["eager"] = ("full", None, lambda x: (eager_attention_forward(
            module, x["query"], x["key"], x["value"], x["mask_additive"], scaling=scale)[0].transpose(1, 2), None))
    else:
        skipped["eager"] = f"needs ~{eager_bytes / 1e9:.0f} GB"
    variants["sdpa"] = ("full", None, lambda x: (sdpa_attention_forward(
        module, x["query"], x["key"], x["value"], x["mask_bool"], scaling=scale)[0].transpose(1, 2), None))

    def hybrid(x):
        out, _ = longspec_attention_forward(module, x["query"], x["key"], x["value"], x["placeholder"],
                                            longspec_tree_mask=x["tree_mask"])
        return out.transpose(1, 2), None

    def prefix_only(x):
        return prefix_attention(x["query"], x["key"][:, :, :context], x["value"][:, :, :context], scale)

    backends = prefix_backends_here(device, shape.dtype)
    for backend in backends:
        variants[f"hybrid[{backend}]"] = ("full", backend, hybrid)
    for backend in backends:
        variants[f"prefix[{backend}]"] = ("prefix", backend, prefix_only)
    if triton_can_run_on(device):
        variants["tree[fused_mask_attn]"] = ("tree", None, lambda x: fused_mask_attn(
            x["query"], x["key"][:, :, context:], x["value"][:, :, context:], x["tree_mask"], scale))
    return variants, skipped


def references(inputs: dict, context: int, scale: float) -> dict:
    q, k, v = inputs["query"], inputs["key"], inputs["value"]
    full = reference(q, k, v, scale, inputs["mask_bool"])
    prefix = reference(q, k[:, :, :context], v[:, :, :context], scale) if context else None
    tree = reference(q, k[:, :, context:], v[:, :, context:], scale, inputs["tree_mask"])
    return {"full": full, "prefix": prefix, "tree": tree}


def input_sets_needed(shape: Shape, context: int, tree: int, device: torch.device) -> int:
    """Enough independent input sets that rotating through them never hits a warm L2."""
    if device.type != "cuda":
        return 1
    l2_bytes = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 50 << 20)
    set_bytes = 2 * shape.num_kv_heads * (context + tree) * shape.head_dim * shape.dtype.itemsize
    return max(1, min(4, math.ceil(2 * l2_bytes / set_bytes)))


def run_shape(shape: Shape, context: int, tree: int, device: torch.device, machine: dict, args) -> Result:
    floor, floor_kind = floor_us(shape, context, tree, machine)
    result = Result(context=context, tree=tree, floor_us=floor, floor_kind=floor_kind)
    sets = [make_inputs(shape, context, tree, device, seed=1000 * context + tree + i)
            for i in range(input_sets_needed(shape, context, tree, device))]
    variants, result.skipped = build_variants(shape, context, tree, device, args.eager_limit_gb)
    refs = references(sets[0], context, shape.head_dim**-0.5)
    plan = plan_splits(shape.batch, shape.num_q_heads, shape.num_kv_heads, tree, context,
                       shape.head_dim, shape.dtype, device)
    result.splitkv_num_splits = plan.num_splits
    print(f"  S={context:>6} T={tree:>3} floor {floor:.1f} us ({floor_kind}); split-KV plan {plan}; "
          f"{len(sets)} input set(s)", flush=True)

    for name, (part, backend, fn) in variants.items():
        ref = refs[part]
        if ref is None:
            result.skipped[name] = "empty prefix"
            continue
        set_prefix_backend(backend)  # chosen once, outside the timed calls
        out, lse = fn(sets[0])
        result.rel_err[name] = relative_error(out, ref[0])
        if lse is not None:
            finite = torch.isfinite(ref[1])
            result.lse_err[name] = (lse.float()[finite] - ref[1][finite]).abs().max().item() if finite.any() else 0.0
        counter = [0]

        def rotating(fn=fn):
            counter[0] += 1
            return fn(sets[counter[0] % len(sets)])

        result.times_us[name] = median_time_us(rotating, device)
        lse_text = f" lse_err {result.lse_err[name]:.2e}" if name in result.lse_err else ""
        print(f"  S={context:>6} T={tree:>3} {name:<24} {result.times_us[name]:9.1f} us"
              f"  rel_err {result.rel_err[name]:.2e}{lse_text}", flush=True)
    set_prefix_backend(None)
    del sets, refs
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


# ---------------------------------------------------------------- report

def markdown_table(results: list[Result]) -> str:
    names = []
    for result in results:
        names += [n for n in result.times_us if n not in names]
    rank = {"eager": 0, "sdpa": 1, "hybrid": 2, "prefix": 3, "tree": 4}
    names.sort(key=lambda n: rank[n.split("[")[0]])  # stable: backends keep their order
    hybrids = [n for n in names if n.startswith("hybrid[")]
    header = ["S", "T", "floor us"] + [f"{n} us" for n in names] + [
        "best hybrid", "vs eager", "vs sdpa", "best / floor"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        cells = [f"{r.context // 1024}k" if r.context >= 1024 else str(r.context), str(r.tree),
                 f"{r.floor_us:.1f} ({r.floor_kind})"]
        cells += [f"{r.times_us[n]:.1f}" if n in r.times_us else "-" for n in names]
        timed = [n for n in hybrids if n in r.times_us]
        if timed:
            best = min(timed, key=r.times_us.get)
            t = r.times_us[best]
            cells += [best[len("hybrid["):-1],
                      f"{r.times_us['eager'] / t:.2f}x" if "eager" in r.times_us else "-",
                      f"{r.times_us['sdpa'] / t:.2f}x" if "sdpa" in r.times_us else "-",
                      f"{t / r.floor_us:.2f}"]
        else:
            cells += ["-"] * 4
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def triton_version() -> str | None:
    try:
        import triton
    except ImportError:
        return None
    return triton.__version__


def main(args) -> int:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda" and not args.quick:
        print("No CUDA device: run with --quick for the CPU smoke mode.", file=sys.stderr)
        return 2
    started = time.time()
    if args.quick:
        shape = Shape(num_q_heads=8, num_kv_heads=2, head_dim=64)
        contexts, trees = args.contexts or [0, 300], args.trees or [5, 16]
    else:
        shape = Shape()
        contexts, trees = args.contexts or [8192, 32768, 131072], args.trees or [16, 64, 128]
    torch.manual_seed(0)
    machine = measure_machine(device, args.quick)
    environment = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "sm_count": streaming_multiprocessor_count(device),
        "torch": torch.__version__,
        "transformers": __import__("transformers").__version__,
        "triton": triton_version(),
        "triton_interpret": os.environ.get("TRITON_INTERPRET"),
        "shape": {k: str(v) for k, v in asdict(shape).items()},
        "copy_TB_per_s": machine["copy_bytes_per_s"] / 1e12,
        "matmul_TFLOP_per_s": machine["matmul_flop_per_s"] / 1e12,
    }
    print(f"device {environment['device']}: copy {machine['copy_bytes_per_s'] / 1e9:.1f} GB/s, "
          f"bf16 matmul {machine['matmul_flop_per_s'] / 1e12:.2f} TFLOP/s", flush=True)

    results = []
    with torch.no_grad():
        for context in contexts:
            for tree in trees:
                results.append(run_shape(shape, context, tree, device, machine, args))

    out_path = args.out or (os.path.join(os.environ["OUT"], "attention_bench.json") if os.environ.get("OUT") else None)
    payload = {"environment": environment, "results": [asdict(r) for r in results],
               "wall_s": time.time() - started}
    if out_path:
        Path(out_path).parent.mkdir(parents=True, exist_ok=True)
        Path(out_path).write_text(json.dumps(payload, indent=2))
        print(f"wrote {out_path}")
    worst = max((e for r in results for e in r.rel_err.values()), default=0.0)
    print(f"\nworst relative error vs float32 reference: {worst:.2e}; wall {time.time() - started:.0f} s\n")
    print(markdown_table(results))
    return 0 if not math.isnan(worst) and worst < 5e-2 else 1


if __name__ == "__main__":
    sys.exit(main(ARGS))
