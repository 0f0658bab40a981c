"""README's promises: CI runs exactly its test command, and its main-job command exists."""

import re
import subprocess
import sys
from pathlib import Path

from hf_longspec.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands():
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)


def test_ci_runs_the_readme_test_command():
    test_command = next(c for c in _readme_commands() if "pytest" in c)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    steps = [step.strip() for step in test_command.split("&&")]
    assert steps[-1] in ci  # the test command itself
    for step in steps[2:-1]:  # the installs after creating the venv
        assert any(step in line for line in ci), step


def test_main_job_command_parses():
    main_command = next(c for c in _readme_commands() if "hf-longspec run" in c)
    arguments = main_command.split("hf-longspec ", 1)[1].split()
    assert build_parser().parse_args(arguments).func.__name__ == "cmd_run"


def test_the_checkouts_kernels_folder_never_shadows_an_installed_kernels_package():
    """Started in a checkout's root (`python -m pytest`, the README's test command), transformers must load
    and `import kernels` must not find this repository's kernels/ folder where the Hugging Face `kernels`
    package is installed: transformers >= 5.25 requires and imports it when it loads, and the folder
    shadowed it (a fresh CI install on 2026-12-03 failed to import every test). The folder still serves
    as `hf_longspec.kernels`."""
    root = Path(__file__).resolve().parents[1]
    code = ("import importlib.metadata, kernels, transformers\n"
            "from transformers import PreTrainedModel\n"
            "import hf_longspec.kernels as ours\n"
            "try:\n    importlib.metadata.distribution('kernels'); installed = True\n"
            "except importlib.metadata.PackageNotFoundError:\n    installed = False\n"
            "print(installed, kernels.__file__, ours.fused_mask_attn.__module__)")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    installed, found, module = done.stdout.split()
    assert module == "hf_longspec.kernels.fused_mask_attn"
    if installed == "True":
        assert not Path(found).resolve().is_relative_to(root / "kernels"), found
