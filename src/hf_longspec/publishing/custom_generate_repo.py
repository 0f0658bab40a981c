"""A repository that plain transformers can run: `generate(custom_generate="owner/repo", trust_remote_code=True)`.

Layout: the draft at the root (config.json, model.safetensors, README.md, training files) and
custom_generate/{generate.py, requirements.txt}; generate.py loads the root's draft and runs
hf-longspec. Publish the result like any draft folder (`hf-longspec publish`).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..configuration_longspec import LongSpecDraftConfig
from .draft_files import folder_files
from .package_files import custom_generate_template_dir

CUSTOM_GENERATE_DIR = "custom_generate"


def build_custom_generate_repo(draft_dir: str | Path, out_dir: str | Path, *, overwrite: bool = False) -> Path:
    """Assemble the repo in `out_dir` from the draft folder `draft_dir`; returns `out_dir`.

    The draft's files are copied (subfolders such as Trainer checkpoints are left out). Re-render
    the card afterwards (`write_card(out_dir, ...)`) so it shows the custom_generate usage.
    """
    draft_dir, out_dir = Path(draft_dir), Path(out_dir)
    LongSpecDraftConfig.from_pretrained(str(draft_dir))  # fails early, with transformers' message, if not a draft
    if not any(name.suffix == ".safetensors" for name in folder_files(draft_dir)):
        raise FileNotFoundError(f"{draft_dir} has no .safetensors weights")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{out_dir} is not empty; pass overwrite=True to replace it")
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for path in sorted(draft_dir.iterdir()):
        if path.is_file():
            shutil.copyfile(path, out_dir / path.name)
    shutil.copytree(
        custom_generate_template_dir(), out_dir / CUSTOM_GENERATE_DIR, ignore=shutil.ignore_patterns("__pycache__")
    )
    return out_dir
