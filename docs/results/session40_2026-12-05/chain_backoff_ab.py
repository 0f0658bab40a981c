"""OMP_NUM_THREADS=2 PYTHONPATH=src python docs/results/session40_2026-12-05/chain_backoff_ab.py OUT.json KIND REPEATS

The plain-step policy with the chain-call backoff (fortieth session: a round the chain's guesses called that loses
doubles the guesses asked for next time, 2 to 8) against the same policy without it (always 2), and vanilla static,
interleaved per prompt, on decode_bench's 8000-token prompts of KIND, 128 new tokens, float32, this CPU. Decode rates
as decode_bench.py takes them (after each call's own first token); every output must equal vanilla's.
It ran with chain_backoff.patch (beside this script) applied: the backoff lost on code and was not landed, so run
`git apply docs/results/session40_2026-12-05/chain_backoff.patch` first."""
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
import decode_bench  # noqa: E402
from hf_longspec.bench.workloads import build_workloads  # noqa: E402
from hf_longspec.embedded import load_embedded_draft, load_embedded_target  # noqa: E402
from hf_longspec.generation import loop  # noqa: E402
from hf_longspec.generation.plain_steps import PlainStepPolicy  # noqa: E402

out, kind, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
target, tokenizer = load_embedded_target(device="cpu")
drafts = {True: load_embedded_draft(target)}
policies = {"backoff": PlainStepPolicy, "no_backoff": lambda: PlainStepPolicy(chain_hits_max=2)}
records = []
for repeat in range(repeats):
    for w in build_workloads(tokenizer, [8000], [kind], 3, seed=0):
        ids = torch.tensor([w.input_ids])
        order = ["vanilla_static", "backoff", "no_backoff"]
        for name in order if repeat % 2 == 0 else order[::-1]:
            if name in policies:
                loop.PlainStepPolicy = policies[name]
            record = decode_bench.run(target, drafts, "vanilla_static" if name == "vanilla_static" else "longspec", ids, 128)
            record.update(variant=name, prompt=w.index, repeat=repeat, kind=kind)
            records.append(record)
            stats = record.get("stats", {})
            print(f"{w.name} r{repeat} {name}: {record['decode_tokens_per_s']:.2f} tok/s"
                  + (f" tau {stats['tau']:.2f} rounds {stats['rounds']} plain steps {stats['plain_steps']}" if stats else ""),
                  flush=True)
loop.PlainStepPolicy = PlainStepPolicy
for r in records:
    same = next(v for v in records if v["variant"] == "vanilla_static" and v["prompt"] == r["prompt"]
                and v["repeat"] == r["repeat"])
    assert r["tokens"] == same["tokens"], (r["variant"], r["prompt"], r["repeat"])
Path(out).write_text(json.dumps(records))
