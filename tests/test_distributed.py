"""Data-parallel training equals single-process training on the same data (2 CPU processes, gloo),
and that training really trains: the weights move far more than the two runs differ."""

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

SCRIPT = Path(__file__).with_name("distributed_train_script.py")


def _run(args, tmp_path, name):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    out = tmp_path / name
    result = subprocess.run([*args, str(SCRIPT), "--output", str(out)] + extra_args(name), env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    log = json.loads((out / "final" / "training_log.json").read_text())
    losses = [entry["loss"] for entry in log if "loss" in entry]
    return load_file(f"{out}-initial.safetensors"), load_file(out / "final" / "model.safetensors"), losses


def extra_args(name):
    return ["--batch-size", "4" if name == "single" else "2"]


def test_two_rank_data_parallel_equals_one_process(tmp_path):
    initial, single, single_losses = _run([sys.executable], tmp_path, "single")
    ddp_initial, ddp, ddp_losses = _run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517"],
        tmp_path, "ddp")
    assert single.keys() == ddp.keys() == initial.keys()
    assert all(torch.equal(initial[name], ddp_initial[name]) for name in initial)  # same start
    for name in single:
        moved = (single[name] - initial[name]).abs().max().item()  # what 6 steps of training changed
        gap = (single[name] - ddp[name]).abs().max().item()
        scale = single[name].abs().max().item()
        assert moved > 1e-2 * max(initial[name].abs().max().item(), 1e-3), (name, "not trained", moved)
        assert gap <= 1e-4 * max(scale, 1.0), (name, gap, scale)
        assert gap <= 1e-3 * moved, (name, gap, moved)
    # the same batches give the same (rank-averaged) losses, and they fall materially
    assert len(single_losses) == len(ddp_losses) == 6
    assert all(abs(a - b) <= 1e-3 * abs(a) for a, b in zip(single_losses, ddp_losses)), (single_losses, ddp_losses)
    assert single_losses[-1] < single_losses[0] - 0.5, single_losses
