"""Where and how a benchmark ran, stored next to its numbers."""

from __future__ import annotations

import datetime
import hashlib
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


def source_digest(root: Path | None = None) -> str | None:
    """sha256 over the Python files under src/hf_longspec and benchmarks (relative path and bytes, sorted):
    what code ran, where `git_commit` can mislead. The device's copy of the working tree carries the
    edited files but may keep an older `.git` (the twenty-second and twenty-third sessions' JSONs named a
    commit that was not the tree that ran), and uncommitted edits never show in a commit. Compare with
    `python -c "from hf_longspec.bench.machine import source_digest; print(source_digest())"` on a checkout."""
    root = Path(__file__).resolve().parents[3] if root is None else Path(root)
    files = sorted(path for folder in ("src/hf_longspec", "benchmarks") for path in (root / folder).rglob("*.py"))
    if not files:
        return None
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


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
        "source_digest": source_digest(),
        "platform": platform.platform(),
    }
