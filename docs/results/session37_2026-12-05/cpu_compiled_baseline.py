"""Vanilla static compiled on the CPU (transformers compiles only on accelerators unless told:
compile_config._compile_all_devices = True) beside vanilla static eager and LongSpec's CPU round, one 4000-token
code prompt, 128 new tokens; decode tokens/s after each method's own prefill (a 1-token call times the prefill)."""
import time, torch
from transformers import CompileConfig
from hf_longspec.embedded import load_embedded_target
from hf_longspec.demo import load_draft_for
from hf_longspec.corpus import long_prompt_ids

target, tok = load_embedded_target()
draft, _ = load_draft_for(target, "embedded")
ids = torch.tensor([long_prompt_ids(tok, 4000, kind="code", split="eval", seed=0)])
compile_everywhere = CompileConfig()
compile_everywhere._compile_all_devices = True  # transformers' own switch (a class attribute, not an argument)
methods = {
    "vanilla_static": dict(cache_implementation="static"),
    "vanilla_static_compiled": dict(cache_implementation="static", compile_config=compile_everywhere),
    "longspec_cpu_round": dict(assistant_model=draft),
}
outs = {}
for name, options in methods.items():
    for run in ("warm", "timed"):
        start = time.perf_counter()
        target.generate(ids, max_new_tokens=1, do_sample=False, **options)
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        out = target.generate(ids, max_new_tokens=128, min_new_tokens=128, do_sample=False, **options)
        total = time.perf_counter() - start
        print(f"{name} {run}: {total:.1f} s, decode {127 / max(total - prefill, 1e-9):.1f} tokens/s", flush=True)
    outs[name] = out
print("identical to vanilla static:", {n: torch.equal(o, outs["vanilla_static"]) for n, o in outs.items()})
