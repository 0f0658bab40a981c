"""The forty-ninth session's CPU probe: inductor's first call with each target layer a nested compile region.

    PYTHONPATH=src python docs/results/session49_2026-12-06/nested_regions_cpu.py forward whole|regional
    PYTHONPATH=src python docs/results/session49_2026-12-06/nested_regions_cpu.py verify whole|regional

``forward``: SmolLM2's own forward over 101 tokens with a static cache (random float32 weights), compiled.
``verify``: the decoder's verification forward (the shipped draft's tree and 32-token chain, 1000 cached tokens).
Each run in a fresh TORCHINDUCTOR_CACHE_DIR. Prints the first and second call's times."""
import sys
import time
import types
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
from sampled_round_cost import DRAFT, SMOLLM2  # noqa: E402
from scale_study import filled_decoder, random_target  # noqa: E402
from transformers import StaticCache  # noqa: E402

from hf_longspec import LongSpecDraftModel  # noqa: E402
from hf_longspec.generation import TreeLayout  # noqa: E402

what, regional = sys.argv[1], sys.argv[2] == "regional"
target = random_target(SMOLLM2, "cpu", torch.float32)
if regional:
    region = torch.compiler.nested_compile_region(type(target.model.layers[0]).forward)
    for layer in target.model.layers:
        layer.forward = types.MethodType(region, layer)
if what == "forward":
    target.config._attn_implementation = "sdpa"
    cache = StaticCache(config=target.config, max_cache_len=1024)
    ids, positions = torch.randint(0, 1000, (1, 101)), torch.arange(500, 601)[None]
    def forward():
        return target(input_ids=ids, position_ids=positions, past_key_values=cache, cache_position=positions[0],
                      logits_to_keep=0).logits
    with torch.no_grad():
        forward()  # eager once: the static cache allocates its buffers outside the compiled call
    compiled = torch.compile(forward)
else:
    draft = LongSpecDraftModel.from_pretrained(str(DRAFT)).eval().bind(target)
    tree = TreeLayout(tuple(draft.config.tree_widths), rerank_leaves=True).with_lookup(32)
    compiled = filled_decoder(target, draft, tree, 1000, torch.device("cpu"), compile=True)._verify
with torch.no_grad():
    begin = time.perf_counter()
    compiled()
    first = time.perf_counter() - begin
    begin = time.perf_counter()
    compiled()
    print(f"{what} regional={regional}: first call {first:.1f} s, second {time.perf_counter() - begin:.3f} s")
