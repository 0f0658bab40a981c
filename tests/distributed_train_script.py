"""Run by tests/test_distributed.py, alone or under `torchrun --nproc_per_node N`: trains a draft
for a tiny random target (identical on every rank) on real local text and saves it, plus the
draft's weights before training (initial.safetensors, written by rank 0)."""

import argparse
import os
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).parent))
from conftest import tiny_llama  # noqa: E402
from conftest import ByteTokenizer  # noqa: E402

from hf_longspec import LongSpecDraftModel  # noqa: E402
from hf_longspec.training.run import TrainRecipe, close_process_group, train_draft  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    torch.manual_seed(0)
    target = tiny_llama(vocab_size=257, hidden_size=64, layers=2, max_positions=1024, initializer_range=0.2)
    recipe = TrainRecipe(
        output_dir=args.output, max_steps=args.steps, seq_len=64, batch_size=args.batch_size, learning_rate=1e-2,
        warmup_steps=0, max_tokens=40_000, save_steps=10**6, logging_steps=1, distill="argmax",
        kinds=["prose"], draft_overrides={"sliding_window": 32},
    )
    draft = LongSpecDraftModel.from_target(target, **recipe.draft_overrides)
    if os.environ.get("RANK", "0") == "0":
        # beside the output folder, not in it: train refuses a non-empty output folder
        save_file({k: v.contiguous() for k, v in draft.state_dict().items()}, f"{args.output}-initial.safetensors")
    train_draft(target, ByteTokenizer(), recipe, draft=draft, progress=False)
    close_process_group()


if __name__ == "__main__":
    main()
