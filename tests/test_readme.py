"""README's promises: CI runs exactly its test command, and its main-job command exists."""

import re
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
