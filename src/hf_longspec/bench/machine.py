"""Where and how a benchmark ran, stored next to its numbers."""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

import torch


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _git_commit() -> str | None:
    root = Path(__file__).resolve().parents[3]
    try:
        result = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                                check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = result.stdout.strip() if result.returncode == 0 else ""
    return commit or None


def device_name(device: torch.device) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{platform.processor() or platform.machine()} CPU ({os.cpu_count()} cores, {torch.get_num_threads()} threads)"


def machine_info(device: torch.device, argv: list[str] | None = None) -> dict:
    import transformers

    from .. import __version__

    return {
        "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command_line": shlex.join(sys.argv if argv is None else argv),
        "device": str(device),
        "device_name": device_name(device),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "transformers": transformers.__version__,
        "triton": _package_version("triton"),
        "evaluate": _package_version("evaluate"),
        "hf_longspec": __version__,
        "git_commit": _git_commit(),
        "platform": platform.platform(),
    }
