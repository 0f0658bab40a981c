"""Run a benchmark script with the sampled walk compiled whole beside a lookup chain too: the guard in
``sampled_walk`` (a chain's rounds compile each depth's tries alone) lifted for this process only, so that what
taking it off would give is measured before it is taken off.

    PYTHONPATH=src python benchmarks/whole_walk_beside_chain.py benchmarks/decode_bench.py --out DIR \
        --methods vanilla_static_sampled longspec_sampled longspec_sampled_lookup32 ...

Why a runner and not an option: the guard is no setting a user should meet; once the GPU has timed the whole
walk beside a chain, either the guard goes or this script does.
"""

import runpy
import sys

from hf_longspec.generation import decoder, sampled_accept


def whole_walk_everywhere(compiled, layout):
    """``sampled_walk`` without its chain guard."""
    return sampled_accept.compiled_whole_walk() if compiled else sampled_accept.sample_accept


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    decoder.sampled_walk = whole_walk_everywhere
    script, sys.argv = sys.argv[1], sys.argv[1:]
    runpy.run_path(script, run_name="__main__")
