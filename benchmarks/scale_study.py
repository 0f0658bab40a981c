"""What one LongSpec round costs against one vanilla decode step, at 8k / 32k / 128k cached tokens,
for the Llama-3.1-8B shape (random bf16 weights: only the cost matters here, not the text).

Per context length, on one GPU and one DynamicCache filled with random K/V (no prefill):

- vanilla step: one 1-token target forward (+ argmax) with eager and with sdpa attention;
- LongSpec round: D draft steps building the default tree (widths 4,16,16,16,16) with a
  `LongSpecDraftModel.from_target(target)`, ONE tree-verification forward with hybrid tree
  attention (+ the greedy tree walk), then committing a fixed full-depth path (depth + 1 nodes;
  random weights accept nothing) into every cache layer and the draft's ring buffer;
- memory: target KV cache bytes; the draft's ring buffer + per-round tree K/V (constant in the
  context length) and the draft's measured transient peak while drafting;
- bytes floors: (bytes a step must read) / copy bandwidth measured in the same run.

After every timed repetition the cache is cropped back, so every repetition sees the same
context. Both sides pay transformers' DynamicCache concatenation (a full cache copy per forward).

PROJECTED speedup = tau x (vanilla step time / round time), with tau measured on the real
SmolLM2 pair (`--tau-from bench.json` written by `hf-longspec bench`, or `--tau X`). It is a
projection: an 8B target's own tau will differ. `break-even tau` = round / step needs no tau.

    PYTHONPATH=src python benchmarks/scale_study.py --out $OUT/scale --tau-from bench-results/bench.json
    PYTHONPATH=src python benchmarks/scale_study.py --quick          # tiny CPU smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import torch

try:
    import hf_longspec  # noqa: F401
except ImportError:  # run from a checkout without PYTHONPATH=src
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM  # noqa: E402

from hf_longspec import LongSpecDraftModel  # noqa: E402
from hf_longspec.bench.machine import machine_info  # noqa: E402
from hf_longspec.bench.probes import copy_bandwidth  # noqa: E402
from hf_longspec.cache_commit import commit_tree_path, crop_cache  # noqa: E402
from hf_longspec.demo import synchronize, timed  # noqa: E402
from hf_longspec.generation import _verification_attention, _verify_forward  # noqa: E402
from hf_longspec.target_support import cache_argument_name  # noqa: E402
from hf_longspec.tree import TreeDrafter  # noqa: E402
from hf_longspec.verification import PathVerifier  # noqa: E402

# "128k" stays 256 below Llama-3.1's 131072 positions so the tree's positions fit too.
FULL_CONTEXTS = (8192, 32768, 131072 - 256)
QUICK_CONTEXTS = (256, 512)
VANILLA_BACKENDS = ("eager", "sdpa")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="JSON file, or a folder for scale_study.json "
                        "(default: $OUT/scale_study.json when OUT is set)")
    parser.add_argument("--quick", action="store_true", help="tiny random Llama on the CPU, short contexts")
    parser.add_argument("--contexts", type=int, nargs="+", default=None, help="cached context lengths")
    parser.add_argument("--widths", type=int, nargs="+", default=None, help="tree widths (default: the draft's)")
    parser.add_argument("--repeats", type=int, default=None, help="timed repetitions (median); default 10, quick 2")
    parser.add_argument("--warmup", type=int, default=None, help="untimed repetitions first; default 3, quick 1")
    parser.add_argument("--tau", type=float, default=None, help="tokens per round for the projection")
    parser.add_argument("--tau-from", default=None, help="bench.json of `hf-longspec bench`: LongSpec tree tau")
    parser.add_argument("--no-llama3-rope", action="store_true", help="plain RoPE instead of Llama-3.1 scaling")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


# ------------------------------------------------------------------------------------------ models
def target_config(quick: bool, llama3_rope: bool) -> LlamaConfig:
    """Llama-3.1-8B shape (or a tiny one for --quick)."""
    rope = {"rope_type": "default", "rope_theta": 500000.0}
    if llama3_rope:
        rope = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    shape = dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                 head_dim=128, intermediate_size=14336, vocab_size=128256, max_position_embeddings=131072)
    if quick:
        shape = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     head_dim=32, intermediate_size=256, vocab_size=512, max_position_embeddings=16384)
    return LlamaConfig(**shape, rope_parameters=rope, tie_word_embeddings=False)


def build_target(config: LlamaConfig, device: torch.device, dtype: torch.dtype):
    """Random weights, created directly on the device (16 GB for the 8B shape)."""
    with torch.device(device):
        model = LlamaForCausalLM._from_config(config, dtype=dtype)
    model.generation_config.eos_token_id = None
    return model.eval()


def filled_cache(target, context: int, device, dtype) -> DynamicCache:
    """A DynamicCache holding `context` random post-RoPE K/V entries per layer (no prefill)."""
    config = target.config
    cache = DynamicCache(config=config)
    with torch.no_grad():
        target(input_ids=torch.zeros(1, 1, dtype=torch.long, device=device), **{cache_argument_name(target): cache},
               use_cache=True, logits_to_keep=1)
    shape = (1, config.num_key_value_heads, context, config.head_dim)
    for layer in cache.layers:
        layer.keys = layer.values = None  # free the 1-token tensors first
        layer.keys = torch.randn(shape, dtype=dtype, device=device)
        layer.values = torch.randn(shape, dtype=dtype, device=device)
    return cache


# ------------------------------------------------------------------------------------------ timing
def median_seconds(fn, device, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    return statistics.median(timed(fn, device)[1] for _ in range(repeats))


def full_depth_path(tree) -> list[int]:
    """Root to the first deepest node: depth + 1 nodes, generally not a prefix chain (so the gather runs)."""
    node, path = int(tree.depths.argmax()), []
    parents = tree.parents.tolist()
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path[::-1]


class Workbench:
    """Target + draft + one filled cache at a fixed context; every callable leaves the cache as found."""

    def __init__(self, target, draft, cache, context: int, widths: list[int], device):
        self.target, self.draft, self.cache, self.context, self.widths = target, draft, cache, context, widths
        self.device = device
        self.cache_kwargs = {cache_argument_name(target): cache, "use_cache": True}
        vocab = target.config.vocab_size
        generator = torch.Generator(device="cpu").manual_seed(context)
        self.sequence = torch.randint(0, vocab, (1, context + 1), generator=generator).to(device)  # root at `context`
        self.ring = draft.start(self.sequence[:, :context])
        self.drafter = TreeDrafter(draft)
        self.verifier = PathVerifier()
        self.root = self.sequence[:, -1:]
        self.root_position = torch.tensor([[context]], device=device)

    @torch.no_grad()
    def vanilla_step(self) -> int:
        out = self.target(input_ids=self.root, position_ids=self.root_position, logits_to_keep=1, **self.cache_kwargs)
        token = int(out.logits[0, -1].argmax())
        crop_cache(self.cache, self.context)
        return token

    @torch.no_grad()
    def draft_tree(self):
        return self.drafter.build(self.ring, self.sequence, self.cache, self.widths)

    @torch.no_grad()
    def verify(self, tree):
        logits = _verify_forward(self.target, tree, self.context, self.cache_kwargs, "hybrid")
        return self.verifier.verify(tree, logits, self.sequence)

    @torch.no_grad()
    def commit(self, tree) -> int:
        path = full_depth_path(tree)
        commit_tree_path(self.cache, self.context, path)
        accepted = tree.tokens[path][None]
        positions = self.context + torch.arange(len(path), device=self.device)[None]
        self.draft.commit(self.ring, accepted, positions)
        crop_cache(self.cache, self.context)
        return len(path)

    def round(self) -> int:
        tree = self.draft_tree()
        self.verify(tree)
        return self.commit(tree)


def round_parts(bench: Workbench, warmup: int, repeats: int) -> dict:
    """Median seconds of each part of a round, timed separately (each part ends in a host sync anyway)."""
    parts = {"draft": [], "verify": [], "commit": []}
    for index in range(warmup + repeats):
        tree, seconds_draft = timed(bench.draft_tree, bench.device)
        _, seconds_verify = timed(lambda: bench.verify(tree), bench.device)  # noqa: B023
        _, seconds_commit = timed(lambda: bench.commit(tree), bench.device)  # noqa: B023
        if index >= warmup:
            parts["draft"].append(seconds_draft)
            parts["verify"].append(seconds_verify)
            parts["commit"].append(seconds_commit)
    return {name: statistics.median(values) for name, values in parts.items()}


# ------------------------------------------------------------------------------------------ memory
def tensor_bytes(*tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def draft_memory(bench: Workbench) -> dict:
    """Ring buffer + per-round tree K/V (analytic) and the measured transient peak while drafting."""
    config = bench.draft.config
    drafted_through = 1 + sum(bench.widths[:-1])  # leaves never run through the draft
    itemsize = bench.ring.keys.element_size()
    tree_kv = 2 * drafted_through * config.num_key_value_heads * config.head_dim * itemsize
    measured = None
    if bench.device.type == "cuda":
        synchronize(bench.device)
        before = torch.cuda.memory_allocated(bench.device)
        torch.cuda.reset_peak_memory_stats(bench.device)
        bench.draft_tree()
        synchronize(bench.device)
        measured = torch.cuda.max_memory_allocated(bench.device) - before
    return {"ring_bytes": bench.ring.nbytes, "tree_kv_bytes": tree_kv, "ring_plus_tree_kv_bytes": bench.ring.nbytes + tree_kv,
            "drafting_transient_peak_bytes": measured}


def bytes_floors(target, draft, context: int, widths: list[int], copy_bytes_per_s: float) -> dict:
    """Seconds to read what a step must read once, at the measured copy bandwidth."""
    config = target.config
    itemsize = target.get_input_embeddings().weight.element_size()
    layer_kv = 2 * config.num_key_value_heads * config.head_dim * itemsize * context
    weights = tensor_bytes(*target.parameters())
    target_pass = weights + config.num_hidden_layers * layer_kv
    lm_head = tensor_bytes(target.get_output_embeddings().weight)
    draft_step = tensor_bytes(*draft.parameters()) + lm_head + layer_kv  # + one target layer's KV
    draft_steps = len(widths)  # one decode_step per depth (the last one proposes the leaves)
    return {
        "vanilla_step_s": target_pass / copy_bytes_per_s,
        "round_s": (target_pass + draft_steps * draft_step) / copy_bytes_per_s,
        "round_target_bytes": target_pass,
        "round_draft_bytes": draft_steps * draft_step,
    }


# ------------------------------------------------------------------------------------------ tau
def read_tau(args) -> tuple[float | None, str]:
    """tau from --tau, or pooled over the LongSpec tree rows of a bench.json (all prompt lengths)."""
    if args.tau is not None:
        return args.tau, "--tau"
    if args.tau_from is None:
        return None, "none given"
    result = json.loads(Path(args.tau_from).read_text())
    rows = [r for r in result["rows"] if r["method"] == "longspec_tree" and r.get("longspec_rounds")]
    if not rows:
        raise SystemExit(f"{args.tau_from} holds no longspec_tree rows with rounds")
    tau = sum(r["longspec_emitted_tokens"] for r in rows) / sum(r["longspec_rounds"] for r in rows)
    draft = result.get("draft", {})
    lengths = ",".join(str(r["length"]) for r in rows)
    source = (f"{args.tau_from}: LongSpec tree on {result['model'].get('target')} ({draft.get('source')}), "
              f"prompts {lengths}, {result['machine'].get('device_name')}")
    if not draft.get("trained", True):
        source += " -- UNTRAINED draft: the projection is not meaningful"
    return tau, source


# ------------------------------------------------------------------------------------------ study
def study_context(target, draft, context: int, widths, device, dtype, warmup: int, repeats: int,
                  copy_bytes_per_s: float, tau: float | None) -> dict:
    cache = filled_cache(target, context, device, dtype)
    bench = Workbench(target, draft, cache, context, widths, device)
    row = {"context": context, "target_kv_cache_bytes": sum(tensor_bytes(layer.keys, layer.values) for layer in cache.layers)}
    for backend in VANILLA_BACKENDS:
        target.set_attn_implementation(backend)
        row[f"vanilla_{backend}_step_s"] = median_seconds(bench.vanilla_step, device, warmup, repeats)
    target.set_attn_implementation("sdpa")
    with _verification_attention(target, "hybrid"):
        row["round_s"] = median_seconds(bench.round, device, warmup, repeats)
        row["round_parts_s"] = round_parts(bench, warmup, repeats)
        row["committed_path_nodes"] = bench.round()
        row["draft_memory"] = draft_memory(bench)
        row["tree_nodes"] = bench.draft_tree().size
    row["bytes_floor"] = bytes_floors(target, draft, context, widths, copy_bytes_per_s)
    for backend in VANILLA_BACKENDS:
        step = row[f"vanilla_{backend}_step_s"]
        row[f"break_even_tau_vs_{backend}"] = row["round_s"] / step
        row[f"projected_speedup_vs_{backend}"] = tau * step / row["round_s"] if tau is not None else None
    del bench, cache
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def _mib(value) -> str:
    return "-" if value is None else f"{value / 2**20:.1f}"


def _ms(value) -> str:
    return f"{value * 1e3:.2f}"


def markdown_table(rows: list[dict], tau: float | None) -> str:
    tau_cell = f"tau={tau:.2f}" if tau is not None else "no tau given"
    header = ("| context | target KV GiB | vanilla step ms eager / sdpa | LongSpec round ms (draft + verify + commit) "
              "| floor ms step / round | break-even tau vs eager / sdpa | draft MiB ring+tree K/V (drafting peak) "
              f"| PROJECTED speedup vs eager / sdpa ({tau_cell}) |")
    lines = [header, "|" + "---|" * 8]
    for row in rows:
        parts, floor, memory = row["round_parts_s"], row["bytes_floor"], row["draft_memory"]
        projected = "-" if tau is None else (
            f"{row['projected_speedup_vs_eager']:.2f} / {row['projected_speedup_vs_sdpa']:.2f}")
        lines.append(
            f"| {row['context']} | {row['target_kv_cache_bytes'] / 2**30:.2f} "
            f"| {_ms(row['vanilla_eager_step_s'])} / {_ms(row['vanilla_sdpa_step_s'])} "
            f"| {_ms(row['round_s'])} ({_ms(parts['draft'])} + {_ms(parts['verify'])} + {_ms(parts['commit'])}) "
            f"| {_ms(floor['vanilla_step_s'])} / {_ms(floor['round_s'])} "
            f"| {row['break_even_tau_vs_eager']:.2f} / {row['break_even_tau_vs_sdpa']:.2f} "
            f"| {_mib(memory['ring_plus_tree_kv_bytes'])} ({_mib(memory['drafting_transient_peak_bytes'])}) "
            f"| {projected} |"
        )
    return "\n".join(lines)


def output_path(out: str | None) -> Path | None:
    if out is None:
        return Path(os.environ["OUT"]) / "scale_study.json" if os.environ.get("OUT") else None
    path = Path(out)
    return path if path.suffix == ".json" else path / "scale_study.json"


def main(argv=None) -> int:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() and not args.quick else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    contexts = args.contexts or (QUICK_CONTEXTS if args.quick else FULL_CONTEXTS)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    repeats = args.repeats or (2 if args.quick else 10)
    tau, tau_source = read_tau(args)

    config = target_config(args.quick, not args.no_llama3_rope)
    target = build_target(config, device, dtype)
    draft = LongSpecDraftModel.from_target(target).eval()
    widths = args.widths or list(draft.config.tree_widths)
    bandwidth = copy_bandwidth(device)
    rows = []
    for context in sorted(contexts):
        rows.append(study_context(target, draft, context, widths, device, dtype, warmup, repeats,
                                  bandwidth["bytes_per_s"], tau))
        print(f"context {context}: vanilla eager {_ms(rows[-1]['vanilla_eager_step_s'])} ms, "
              f"sdpa {_ms(rows[-1]['vanilla_sdpa_step_s'])} ms, LongSpec round {_ms(rows[-1]['round_s'])} ms",
              flush=True)
    ring_tree = {row["draft_memory"]["ring_plus_tree_kv_bytes"] for row in rows}
    peaks = [row["draft_memory"]["drafting_transient_peak_bytes"] for row in rows]
    # no growth with context: later peaks may not exceed the shortest context's (allocator rounding: 5%)
    peaks_flat = None in peaks or max(peaks[1:], default=peaks[0]) <= 1.05 * peaks[0]
    result = {
        "schema": "hf-longspec-scale-study/1",
        "machine": machine_info(device),
        "shape": "tiny (quick)" if args.quick else "Llama-3.1-8B (random weights)",
        "config": config.to_dict(),
        "dtype": str(dtype),
        "tree_widths": widths,
        "warmup": warmup,
        "repeats": repeats,
        "copy_bandwidth": bandwidth,
        "target_weight_bytes": tensor_bytes(*target.parameters()),
        "draft_weight_bytes": tensor_bytes(*draft.parameters()),
        "tau": tau,
        "tau_source": tau_source,
        "draft_memory_constant": len(ring_tree) == 1 and peaks_flat,
        "rows": rows,
    }
    path = output_path(args.out)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(result, indent=1, default=str))
        print(f"wrote {path}")
    print(f"{result['machine']['device_name']}; {result['shape']}, {dtype}; copy bandwidth "
          f"{bandwidth['bytes_per_s'] / 1e9:.1f} GB/s; tree widths {widths}; median of {repeats}")
    print(f"tau for the projection: {tau if tau is not None else '-'} ({tau_source})")
    print(f"draft memory (ring + tree K/V, and the measured drafting peak on CUDA) constant across contexts: "
          f"{'yes' if result['draft_memory_constant'] else 'NO'}")
    print("PROJECTED speedup = tau x vanilla step / LongSpec round (a projection, not a measured generate() speedup)")
    print()
    print(markdown_table(rows, tau))
    return 0


if __name__ == "__main__":
    sys.exit(main())
