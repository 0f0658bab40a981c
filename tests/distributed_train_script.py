"""Run by tests/test_distributed.py, alone, under `torchrun --nproc_per_node N` or under
`accelerate launch` with an FSDP config: trains a draft for a tiny random target (identical on
every rank) on real local text and saves it, plus the draft's weights before training
(initial.safetensors, written by rank 0). Fails if the target was sharded or wrapped."""

import argparse
import os
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).parent))
from conftest import tiny_llama  # noqa: E402
from conftest import ByteTokenizer  # noqa: E402

from hf_longspec import LongSpecDraftModel  # noqa: E402
from hf_longspec.distributed_exit import exit_distributed_process  # noqa: E402
from hf_longspec.training.run import TrainRecipe, train_draft  # noqa: E402


def fsdp_on_cpu() -> None:
    """accelerate (1.15) turns an FSDP config into plain DDP on CPU processes: it enables FSDP only
    for GPU-like distributed types. Flip the state it builds back to FSDP so that the Trainer's FSDP2
    path (sharding, gloo collectives, full state dict on rank 0) runs in CPU tests unchanged."""
    from accelerate.state import AcceleratorState, DistributedType, PartialState

    init = AcceleratorState.__init__

    def patched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if self.distributed_type == DistributedType.MULTI_CPU and kwargs.get("fsdp_plugin") is not None:
            self.distributed_type = PartialState._shared_state["distributed_type"] = DistributedType.FSDP
            self.fsdp_plugin = kwargs["fsdp_plugin"]

    AcceleratorState.__init__ = patched


def count_tokenizing(log: Path) -> None:
    """Append this rank's number to `log` whenever the data cache tokenizes text (a miss), so the test
    can see how many ranks built the chunks. Each build is held open for a few seconds first, as a real
    corpus's would be, so that a rank not made to wait would miss the cache too (the tiny text here
    tokenizes faster than the ranks start)."""
    from hf_longspec.training import data_cache

    class Counted(data_cache.LocalTextChunks):
        def __init__(self, *args, **kwargs):
            with log.open("a") as file:
                file.write(os.environ.get("RANK", "0") + "\n")
            time.sleep(5)
            super().__init__(*args, **kwargs)

    data_cache.LocalTextChunks = Counted


def check_target_replicated(target) -> None:
    """The frozen target must stay whole on every rank: no sharded parameter, no FSDP-wrapped module."""
    from torch.distributed.tensor import DTensor

    sharded = [name for name, p in target.named_parameters() if isinstance(p, DTensor)]
    wrapped = [name for name, m in target.named_modules() if type(m).__name__.startswith("FSDP")]
    assert not sharded and not wrapped, ("target sharded or wrapped", sharded, wrapped)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--output", required=True)
    parser.add_argument("--batch-size", type=int, required=True)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--max-seconds", type=float, default=None)
    parser.add_argument("--rollout-steps", type=int, default=1)
    parser.add_argument("--data-cache", default=None, help="a data-cache folder (recipe.data_cache)")
    args = parser.parse_args()
    if args.data_cache:
        count_tokenizing(Path(f"{args.output}-tokenized.txt"))
    if os.environ.get("ACCELERATE_USE_FSDP") == "true" and not torch.cuda.is_available():
        fsdp_on_cpu()
    torch.manual_seed(0)
    target = tiny_llama(vocab_size=257, hidden_size=64, layers=2, max_positions=1024, initializer_range=0.2)
    recipe = TrainRecipe(
        output_dir=args.output, max_steps=args.steps, seq_len=64, batch_size=args.batch_size, learning_rate=1e-2,
        warmup_steps=0, max_tokens=40_000, save_steps=10**6, logging_steps=1, distill="argmax",
        kinds=["prose"], draft_overrides={"sliding_window": 32}, max_seconds=args.max_seconds,
        rollout_steps=args.rollout_steps, data_cache=args.data_cache,
    )
    draft = LongSpecDraftModel.from_target(target, **recipe.draft_overrides)
    if os.environ.get("RANK", "0") == "0":
        # beside the output folder, not in it: train refuses a non-empty output folder
        save_file({k: v.contiguous() for k, v in draft.state_dict().items()}, f"{args.output}-initial.safetensors")
    trained = train_draft(target, ByteTokenizer(), recipe, draft=draft, progress=False)
    check_target_replicated(target)
    if os.environ.get("RANK", "0") == "0":  # how the draft was trained: FSDPLongSpecDraftModel under FSDP2
        Path(f"{args.output}-wrapper.txt").write_text(type(trained).__name__)
    exit_distributed_process(0)


if __name__ == "__main__":
    main()
