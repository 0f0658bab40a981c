"""Data-parallel training equals single-process training on the same data (2 CPU processes, gloo)."""

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
    return load_file(out / "final" / "model.safetensors")


def extra_args(name):
    return ["--batch-size", "4" if name == "single" else "2"]


def test_two_rank_data_parallel_equals_one_process(tmp_path):
    single = _run([sys.executable], tmp_path, "single")
    ddp = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29517"],
               tmp_path, "ddp")
    assert single.keys() == ddp.keys()
    initial_gap = 0.0
    for name in single:
        difference = (single[name] - ddp[name]).abs().max().item()
        scale = single[name].abs().max().item()
        assert difference <= 1e-4 * max(scale, 1.0), (name, difference, scale)
        initial_gap = max(initial_gap, difference)
    assert any(not torch.equal(single[n], torch.ones_like(single[n])) for n in single)  # trained, not default
