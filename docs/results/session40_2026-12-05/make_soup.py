"""The fortieth session's soups: the mean of drafts' weights (in float32, saved in bf16), config from the first.

    python make_soup.py OUT DRAFT_FOLDER [DRAFT_FOLDER ...]
    # soup2: the stage-2 drafts of seeds 0 and 1 (call40_stage2.sh's draft_stage2-seed{0,1}.tar)
    # soup3: the shipped draft's folder, then the same two
"""

import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

out, folders = Path(sys.argv[1]), [Path(path) for path in sys.argv[2:]]
weights = [load_file(folder / "model.safetensors") for folder in folders]
if any(set(w) != set(weights[0]) for w in weights):
    raise SystemExit("the drafts name different tensors: not one architecture")
out.mkdir(parents=True, exist_ok=True)
soup = {name: (sum(w[name].float() for w in weights) / len(weights)).to(torch.bfloat16) for name in weights[0]}
save_file(soup, out / "model.safetensors", metadata={"format": "pt"})
shutil.copy(folders[-1] / "config.json", out / "config.json")
