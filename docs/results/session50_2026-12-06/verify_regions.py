"""The fiftieth session's CPU probe: inductor's first call of the decoder's verification, compiled whole, or with each
target layer's MLP (and its two RMSNorms) one ``torch.compiler.nested_compile_region`` shared by the 30 layers (the
layer itself cannot be a region: its K and V are views of one cache storage, forty-ninth session).

    PYTHONPATH=src python docs/results/session50_2026-12-06/verify_regions.py whole|mlp|mlp_norm|mlp_instance|mlp_norm_instance [cuda]

SmolLM2's shape, random float32 weights, the shipped draft's tree and 32-token chain, 1000 cached tokens (on cuda: bf16,
8000 cached tokens); run each in
a fresh TORCHINDUCTOR_CACHE_DIR. Prints the first and second call's times and the largest difference from the eager
verification's logits."""
import sys, time, types
from pathlib import Path
import torch
ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))
from sampled_round_cost import DRAFT, SMOLLM2
from scale_study import filled_decoder, random_target
from hf_longspec import LongSpecDraftModel
from hf_longspec.generation import TreeLayout
mode = sys.argv[1]
device = torch.device(sys.argv[2] if len(sys.argv) > 2 else "cpu")
dtype, length = (torch.bfloat16, 8000) if device.type == "cuda" else (torch.float32, 1000)
target = random_target(SMOLLM2, device, dtype)
def regionize(module, per_instance):
    """The module's class forward as a nested region: decorated on the class, or (``per_instance``) bound to each
    instance as a method, as the forty-ninth session's probe bound it (that form computes wrong outputs)."""
    cls = type(module)
    region = torch.compiler.nested_compile_region(cls.forward)
    if not per_instance:
        cls.forward = region
        return
    for layer in target.model.layers:
        for m in layer.modules():
            if type(m) is cls:
                m.forward = types.MethodType(region, m)
per_instance = mode.endswith("_instance")
if mode.startswith("mlp"):
    regionize(target.model.layers[0].mlp, per_instance)
if mode.startswith("mlp_norm"):
    regionize(target.model.layers[0].input_layernorm, per_instance)
draft = LongSpecDraftModel.from_pretrained(str(DRAFT), dtype=dtype).to(device).eval().bind(target)
tree = TreeLayout(tuple(draft.config.tree_widths), rerank_leaves=True).with_lookup(32)
decoder = filled_decoder(target, draft, tree, length, device, compile=True)
sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
with torch.no_grad():
    ref = decoder._verify_forward().clone()
    sync(); begin = time.perf_counter(); out = decoder._verify(); sync(); first = time.perf_counter() - begin
    begin = time.perf_counter(); decoder._verify(); sync(); second = time.perf_counter() - begin
print(f"verify {mode}: first call {first:.1f} s, second {second:.3f} s, max diff vs eager {(out - ref).abs().max().item():.2e}")
