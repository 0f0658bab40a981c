"""OMP_NUM_THREADS=2 PYTHONPATH=src python docs/results/session41_2026-12-05/chain_hits_ab.py OUT.json KIND REPEATS [HITS ...]

The plain-step policy asking for a round after HITS plain steps in a row whose token the lookup chain guessed
(`PlainStepPolicy(chain_hits_for_a_round=HITS)`; the shipped value is 2), against vanilla static, interleaved per
prompt on decode_bench's 8000-token prompts of KIND (benchmarks/plain_step_timing.py `policies_against_vanilla`)."""
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
from plain_step_timing import policies_against_vanilla  # noqa: E402
from hf_longspec.generation.plain_steps import PlainStepPolicy  # noqa: E402

out, kind, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
hits = [int(h) for h in sys.argv[4:]] or [2, 3]
policies_against_vanilla(out, kind, repeats, {f"hits{h}": partial(PlainStepPolicy, chain_hits_for_a_round=h) for h in hits})
