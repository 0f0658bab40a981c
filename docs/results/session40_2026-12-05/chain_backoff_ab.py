"""OMP_NUM_THREADS=2 PYTHONPATH=src python docs/results/session40_2026-12-05/chain_backoff_ab.py OUT.json KIND REPEATS

The plain-step policy with the chain-call backoff (fortieth session: a round the chain's guesses called that loses
doubles the guesses asked for next time, 2 to 8) against the same policy without it (always 2), and vanilla static,
interleaved per prompt, on decode_bench's 8000-token prompts of KIND, 128 new tokens, float32, this CPU. Decode rates
as decode_bench.py takes them (after each call's own first token); every output must equal vanilla's.
It ran with chain_backoff.patch (beside this script) applied: the backoff lost on code and was not landed, so run
`git apply docs/results/session40_2026-12-05/chain_backoff.patch` first. (Since the forty-first session the
interleaved runs are benchmarks/plain_step_timing.py's `policies_against_vanilla`, the loop this script held.)"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from plain_step_timing import policies_against_vanilla  # noqa: E402
from hf_longspec.generation.plain_steps import PlainStepPolicy  # noqa: E402

out, kind, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
policies_against_vanilla(out, kind, repeats,
                         {"backoff": PlainStepPolicy, "no_backoff": lambda: PlainStepPolicy(chain_hits_max=2)})
