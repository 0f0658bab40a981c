"""Exactness against vanilla greedy output, through the local `evaluate` metric module.

The metric lives in hf_longspec/metrics/token_exact_match and is loaded from that folder with
`evaluate.load` (nothing is fetched). Where `evaluate` is not installed (the GPU machine), the
same module file is imported directly and its plain function is used; `backend` says which.
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path

METRIC_NAME = "token_exact_match"


def metric_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "metrics" / METRIC_NAME


class TokenExactMatch:
    """`compute(predictions, references)` -> exact_match, token_accuracy, first_divergence, ..."""

    def __init__(self):
        try:
            import evaluate
        except ImportError:
            evaluate = None
        if evaluate is not None:
            self._metric = evaluate.load(str(metric_dir()))
            self.backend = "evaluate"
        else:
            spec = importlib.util.spec_from_file_location(METRIC_NAME, metric_dir() / f"{METRIC_NAME}.py")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._function = module.token_exact_match
            self.backend = "module function (evaluate not installed)"

    def compute(self, predictions: list[list[int]], references: list[list[int]]) -> dict:
        if self.backend == "evaluate":
            return self._metric.compute(predictions=predictions, references=references)
        return self._function(predictions, references)


@lru_cache(maxsize=1)
def token_exact_match() -> TokenExactMatch:
    """The metric, loaded once per process."""
    return TokenExactMatch()
