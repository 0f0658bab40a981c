"""``longspec_compile="auto"``: when an uncompiled decoder should start compiling (ski rental).

Compiling the round costs seconds once and saves a share of every later round. Whether it pays depends on how
many rounds will follow, which no call knows. The ski-rental rule needs no forecast: run uncompiled ("rent")
and compile ("buy") once the rounds run so far have lost what compiling costs. Its total time is never more
than twice that of the better fixed choice in hindsight (never compile, or compile at the first round), where
the fixed choices take seconds as below; a short call never waits for the compiler.

The prices were measured on an NVIDIA H100 with SmolLM2's shape, 8000 cached tokens, greedy rounds with the
chain, each setting cold in a fresh process (docs/benchmarks.md, the fiftieth session's compile choice): the
first round uncompiled 9.9 s, compiled whole 59.4 s, the drafting alone compiled 29.9 s; a round 6.426 ms
uncompiled, 3.627 ms compiled whole, 5.214 ms with the drafting alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UnsupportedGenerationError

COMPILE_ALL_SECONDS = 59.4 - 9.9  # what compiling the drafting and the verification adds to the first round
COMPILE_DRAFTING_SECONDS = 29.9 - 9.9  # the drafting alone (a target bound by its bytes keeps eager GEMMs)
SAVED_BY_ALL = 1 - 3.627 / 6.426  # the share of an uncompiled round that compiling both saves (0.44)
SAVED_BY_DRAFTING = 1 - 5.214 / 6.426  # the drafting alone (0.19)
COMPILE_AUTO = "auto"


def check_compile_option(value, tensor_parallel: bool = False) -> None:
    """``longspec_compile`` is None (the default), True, False or "auto"; anything else is refused, and "auto" with
    a tensor-parallel target, whose ranks would each time their own rounds and could decide apart."""
    if value == COMPILE_AUTO and tensor_parallel:
        raise UnsupportedGenerationError(f"longspec_compile={COMPILE_AUTO!r} with a tensor-parallel target: each rank "
                                         "would decide from its own timing when to compile; allowed there: None, True "
                                         "or False.")
    if value is None or isinstance(value, bool) or value == COMPILE_AUTO:
        return
    raise UnsupportedGenerationError(f"longspec_compile={value!r}; allowed: None (the default: compiled on CUDA), "
                                     f"True, False, or {COMPILE_AUTO!r} (compiled once uncompiled rounds have cost "
                                     "what compiling costs).")


@dataclass
class CompileRental:
    """Per decoder: the seconds its uncompiled rounds have lost against compiled ones, and the price of compiling."""

    compile_seconds: float
    saved_share: float
    lost_seconds: float = 0.0

    @classmethod
    def for_round(cls, compile_verify: bool) -> "CompileRental":
        """The prices of compiling what the decoder would compile: the drafting, and the verification if asked."""
        if compile_verify:
            return cls(COMPILE_ALL_SECONDS, SAVED_BY_ALL)
        return cls(COMPILE_DRAFTING_SECONDS, SAVED_BY_DRAFTING)

    def record(self, round_seconds: float) -> bool:
        """Count one timed uncompiled round (its wall-clock seconds); True once compiling has been paid for."""
        self.lost_seconds += round_seconds * self.saved_share
        return self.paid()

    def paid(self) -> bool:
        return self.lost_seconds >= self.compile_seconds
