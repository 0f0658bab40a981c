"""Train a LongSpec draft for a target with the transformers Trainer (same code as `hf-longspec train`).

    python examples/train_draft.py --output runs/smollm2 --max-steps 200          # embedded SmolLM2
    python examples/train_draft.py --output runs/x --target /path/to/llama --max-steps 1000
    torchrun --nproc_per_node 8 examples/train_draft.py --output runs/x --target ...   # data parallel
    accelerate launch --config_file examples/fsdp_accelerate_2gpu.yaml examples/train_draft.py --output runs/x ...  # FSDP2

On CUDA the draft trains in bf16 autocast (fp32 master weights), on CPU in fp32. Checkpoints land
in OUTPUT/checkpoint-*, `--resume` continues from the last one, the final draft in OUTPUT/final.
OUTPUT must be new or empty unless `--resume` or `--overwrite-output` (replace the earlier run) is given.
"""

import sys

from hf_longspec.cli import main

if __name__ == "__main__":
    sys.exit(main(["train", *sys.argv[1:]]))
