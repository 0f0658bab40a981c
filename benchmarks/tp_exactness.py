"""Greedy LongSpec on a tensor-parallel target emits the single-GPU tokens, on every rank (float32).

    PYTHONPATH=src python benchmarks/tp_exactness.py --out DIR --gpus 2             # GPUs (NCCL)
    PYTHONPATH=src python benchmarks/tp_exactness.py --out DIR --gpus 2 --quick     # CPU (gloo), tiny only

Two random float32 targets (TP needs head counts that split evenly; SmolLM2 has 3 KV heads):
- ``tiny``: a Llama with 4 query / 2 KV heads, CUDA graphs without compile (TP's default path);
- ``llama8b_4layers``: the Llama-3.1-8B shape (4096 hidden, 32 / 8 heads, 128256 vocab) cut to 4
  layers, graphs without compile (compiling the 8B shape costs minutes and does not change the math).
For each: a random draft and a real-text prompt (bytes of a local source file as token ids) are
saved; tests/tensor_parallel_script.py runs once as one process on one device (the reference) and
once under torchrun with ``tp_plan="auto"``. Each target takes 1-3 minutes on the H200 (compile). Compared: vanilla TP vs vanilla single, LongSpec
(plain and steered onto non-chain paths) on every rank vs vanilla single, and the last drafted tree.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from scale_study import LLAMA_8B  # noqa: E402
from tp_study import write_random_checkpoint  # noqa: E402

from hf_longspec import LongSpecDraftModel  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "tests" / "tensor_parallel_script.py"
TINY_TP = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=4096, initializer_range=0.3)
SHAPES = {"tiny": (TINY_TP, 400, 48, 0), "llama8b_4layers": ({**LLAMA_8B, "num_hidden_layers": 4}, 1500, 64, 0)}


def prepare(folder: Path, shape: dict, prompt_tokens: int, device) -> None:
    write_random_checkpoint(folder / "target", shape, torch.float32, device)
    from transformers import AutoModelForCausalLM

    target = AutoModelForCausalLM.from_pretrained(folder / "target", dtype=torch.float32, device_map=device)
    torch.manual_seed(0)
    draft = LongSpecDraftModel.from_target(target, sliding_window=64)
    with torch.no_grad():
        for parameter in draft.parameters():
            parameter.add_(torch.randn_like(parameter) * 0.05)
    draft.save_pretrained(folder / "draft")
    text = Path(torch.__file__).read_bytes()  # real text: torch/__init__.py
    torch.save(torch.tensor([list(text[:prompt_tokens])]), folder / "prompt.pt")
    del target, draft


def run(folder: Path, name: str, launcher: list[str], new_tokens: int, compile_flag, reference=None,
        log_dir: Path | None = None, limit: float = 900) -> list[dict]:
    """Runs the script; its output goes to ``log_dir/<shape>_<name>.log`` as it comes (a run cut off by a
    time limit keeps its progress lines and, past ``limit`` - 10 s, every rank's stack)."""
    out = folder / name
    args = [*launcher, str(SCRIPT), "--target", str(folder / "target"), "--draft", str(folder / "draft"),
            "--prompt", str(folder / "prompt.pt"), "--out", str(out), "--new-tokens", str(new_tokens)]
    if compile_flag is not None:
        args += ["--compile", str(compile_flag)]
    if reference is not None:
        args += ["--reference", str(reference)]
    args += ["--hang-dump", str(max(10.0, limit - 10))]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    log = (log_dir or folder) / f"{folder.name}_{name}.log"
    with open(log, "w") as sink:
        done = subprocess.run(args, env=env, stdout=sink, stderr=subprocess.STDOUT, timeout=limit + 20)
    results = sorted(out.glob("rank*.json"))
    for path in results:  # beside the log, so they come back with $OUT whatever happens next
        shutil.copy(path, (log_dir or folder) / f"{folder.name}_{name}_{path.name}")
    if done.returncode != 0:
        raise RuntimeError(f"{name} failed (exit {done.returncode}, {len(results)} rank results written):\n"
                           f"{log.read_text()[-3000:]}")
    return [json.loads(p.read_text()) for p in results]


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--work", default="/tmp/tp_exactness")
    parser.add_argument("--shapes", nargs="+", default=None)
    parser.add_argument("--limit", type=float, default=900, help="seconds per script run before its stacks are dumped")
    args = parser.parse_args(argv)
    device = "cpu" if args.quick or not torch.cuda.is_available() else "cuda:0"
    shapes = args.shapes or (["tiny"] if args.quick else list(SHAPES))
    summary = {}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in shapes:
        shape, prompt_tokens, new_tokens, compile_flag = SHAPES[name]
        folder = Path(args.work) / name
        shutil.rmtree(folder, ignore_errors=True)  # never reuse a target of another shape or version
        begin = time.perf_counter()
        try:
            prepare(folder, shape, prompt_tokens, device)
            single = run(folder, "single", [sys.executable], new_tokens, compile_flag, log_dir=out,
                         limit=args.limit)[0]  # the reference
            print(f"{name}: single process done at {time.perf_counter() - begin:.0f} s", flush=True)
            torch.save(torch.tensor(single["vanilla"]), folder / "reference.pt")
            ranks = run(folder, "tp", [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node",
                                       str(args.gpus)], new_tokens, compile_flag, folder / "reference.pt",
                        log_dir=out, limit=args.limit)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            summary[name] = {"error": str(error)[-3000:]}
            print(name, "FAILED", str(error)[-3000:], flush=True)
            continue
        reference = single["vanilla"]
        summary[name] = {
            "tp_size": [r["tp_size"] for r in ranks],
            "single_longspec_identical": single["longspec"] == reference and single["steered"] == reference,
            "tp_vanilla_identical": [r["vanilla"] == reference for r in ranks],
            "tp_longspec_identical": [r["longspec"] == reference for r in ranks],
            "tp_steered_identical": [r["steered"] == reference for r in ranks],
            "same_last_tree_as_single": [r["last_tree"] == single["last_tree"] for r in ranks],
            "tp_batch_identical": [r["longspec_batch"] == r["vanilla_batch"] == single["vanilla_batch"] for r in ranks],
            "single_stats": {"plain": single["longspec_stats"], "steered": single["steered_stats"]},
            "tp_stats": [{"plain": r["longspec_stats"], "steered": r["steered_stats"]} for r in ranks],
            "new_tokens": new_tokens, "prompt_tokens": prompt_tokens, "seconds": time.perf_counter() - begin,
        }
        print(name, json.dumps(summary[name]), flush=True)
        (out / "tp_exactness.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
