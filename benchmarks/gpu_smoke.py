"""GPU smoke check of the whole decoding loop on tiny random Llama targets (no model download):
greedy exactness vs vanilla generate with the hybrid attention's compiled kernels, in float32
and bfloat16, for an untrained draft and an oracle draft (tau must reach depth + 1).

    PYTHONPATH=src python benchmarks/gpu_smoke.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import tiny_llama  # noqa: E402
from oracle import OracleDraft  # noqa: E402

from hf_longspec import LongSpecDraftModel  # noqa: E402


def check(dtype, draft_class, widths, prompt_len=600, new=48, mode="hybrid"):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    target = tiny_llama(vocab_size=512, hidden_size=256, layers=4, heads=8, kv_heads=2, max_positions=4096,
                        initializer_range=0.05).to(device=device, dtype=dtype)
    draft = draft_class.from_target(target, tree_widths=widths).to(device=device, dtype=dtype)
    ids = torch.randint(0, 512, (1, prompt_len), generator=torch.Generator().manual_seed(0)).to(device)
    reference = target.generate(ids, max_new_tokens=new, do_sample=False)
    start = time.perf_counter()
    out = target.generate(ids, assistant_model=draft, max_new_tokens=new, do_sample=False,
                          longspec_verify_attention=mode)
    seconds = time.perf_counter() - start
    same = torch.equal(out, reference)
    first_diff = (out[0] != reference[0]).nonzero()
    stats = draft.last_stats
    print(f"{str(dtype):15s} {draft_class.__name__:18s} {str(widths):18s} {mode:7s} identical={same} "
          f"first_diff={first_diff[0].item() if len(first_diff) else None} tau={stats.tau:.2f} "
          f"rounds={stats.rounds} {seconds:.2f}s", flush=True)
    return same


def main():
    results = []
    for dtype in (torch.float32, torch.bfloat16):
        results.append(check(dtype, LongSpecDraftModel, [4, 16, 16, 16, 16]))
        results.append(check(dtype, OracleDraft, [1, 1, 1, 1]))
        results.append(check(dtype, OracleDraft, [4, 8, 8]))
        results.append(check(dtype, LongSpecDraftModel, [4, 16, 16, 16, 16], mode="masked"))
    print(f"smoke: {sum(results)}/{len(results)} identical")


if __name__ == "__main__":
    main()
