"""Benchmark results for the model card: read from the caller's JSON, never made up.

Two formats are read:

1. `bench.json` written by `hf-longspec bench` (schema "hf-longspec-bench/1"): one run per row of
   `rows` (method, prompt length); tau is the LongSpec stats' tau (else tokens per target forward),
   tokens/s the decode rate after prefill, speedup the decode-rate ratio against the FASTER of
   vanilla eager and vanilla sdpa on the same prompts, identical = exact match against vanilla sdpa.

2. A hand-written summary (every field optional; unknown fields ignored):

    {"environment": {"device": "NVIDIA H200", "dtype": "bfloat16", "torch": "2.11", "transformers": "5.17.0",
                     "draft weights": "bf16-sha256:0123456789abcdef"},
     "runs": [{"task": "code", "prompt_tokens": 4096, "new_tokens": 128, "method": "vanilla",
               "tokens_per_second": 41.0},
              {"task": "code", "prompt_tokens": 4096, "new_tokens": 128, "method": "longspec",
               "tokens_per_second": 98.3, "tau": 3.4, "speedup": 2.4, "exact_match": 1.0}]}

   "draft weights" (optional) names the weights measured (publishing.weights_digest); a card rendered
   for other weights is refused. A run without "speedup" gets tokens_per_second / the vanilla run's
   tokens_per_second of the same (task, prompt_tokens, new_tokens) when both were measured; otherwise
   it stays unmeasured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

HARNESS_SCHEMA_PREFIX = "hf-longspec-bench/"
DRAFT_WEIGHTS = "draft weights"  # environment key: the measured draft's weights digest (publishing.weights_digest)
HARNESS_RATE_NOTE = (
    "Tokens/s: decode rate after the prompt's prefill. Speedup: that rate over the faster of vanilla "
    "eager and vanilla sdpa `generate()` on the same prompts. Identical: exact match against vanilla sdpa."
)


@dataclass(frozen=True)
class BenchmarkRun:
    method: str | None = None  # as shown on the card
    is_longspec: bool = False
    is_baseline: bool = False
    task: str | None = None
    prompt_tokens: int | None = None
    new_tokens: int | None = None
    tau: float | None = None
    tokens_per_second: float | None = None
    speedup: float | None = None
    exact_match: float | None = None  # fraction of prompts whose output equals vanilla's

    @property
    def setting(self) -> tuple:
        return (self.task, self.prompt_tokens, self.new_tokens)


@dataclass(frozen=True)
class BenchmarkResults:
    environment: dict = field(default_factory=dict)
    runs: tuple[BenchmarkRun, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def longspec_methods(self) -> tuple[str, ...]:
        """Names of the LongSpec variants measured, in order of first appearance."""
        return tuple(dict.fromkeys(run.method or "LongSpec" for run in self.runs if run.is_longspec))

    def longspec_range(self, metric: str, method: str | None = None) -> tuple[float, float] | None:
        """(min, max) of a metric over LongSpec runs (of one method) that measured it; None if none did."""
        values = [
            getattr(run, metric)
            for run in self.runs
            if run.is_longspec and method in (None, run.method or "LongSpec") and getattr(run, metric) is not None
        ]
        return (min(values), max(values)) if values else None


def load_benchmark(path: str | Path | None) -> BenchmarkResults:
    """The results in `path` (either format of the module docstring); empty results for None."""
    if path is None:
        return BenchmarkResults()
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, list):
        data = {"runs": data}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object with 'runs' (or a list of runs), got {type(data).__name__}")
    if str(data.get("schema", "")).startswith(HARNESS_SCHEMA_PREFIX):
        return _from_harness(data)
    return _from_summary(data, path)


# ----------------------------------------------------------------------------- hf-longspec bench
def _from_harness(data: dict) -> BenchmarkResults:
    settings, machine = data.get("settings") or {}, data.get("machine") or {}
    model, draft = data.get("model") or {}, data.get("draft") or {}
    task = "+".join(settings.get("kinds") or []) or None
    runs = tuple(_harness_run(row, task, settings.get("max_new_tokens")) for row in data.get("rows") or [])
    environment = {
        "device": machine.get("device_name"),
        "dtype": str(model["dtype"]).removeprefix("torch.") if model.get("dtype") else None,
        "torch": machine.get("torch"),
        "transformers": machine.get("transformers"),
        "hf-longspec": machine.get("hf_longspec"),
        "date": str(machine["date_utc"])[:10] if machine.get("date_utc") else None,
        "draft": draft.get("source"),
        DRAFT_WEIGHTS: draft.get("weights_digest"),
    }
    notes = [HARNESS_RATE_NOTE]
    if draft.get("trained") is False:
        notes.append("These runs used an UNTRAINED draft: they do not describe this model's speed.")
    notes += [str(note) for note in data.get("notes") or []]
    return BenchmarkResults({k: v for k, v in environment.items() if v is not None}, runs, tuple(notes))


def _harness_run(row: dict, task: str | None, new_tokens) -> BenchmarkRun:
    name = str(row.get("method") or "")
    speedups = [row.get(key) for key in ("speedup_vs_eager", "speedup_vs_sdpa") if row.get(key) is not None]
    tau = row.get("longspec_tau")
    exactness = row.get("exactness_vs_sdpa")
    return BenchmarkRun(
        method=row.get("label") or name or None,
        is_longspec=name.startswith("longspec"),
        is_baseline=name.startswith("vanilla"),
        task=task,
        prompt_tokens=_optional(row.get("length"), int),
        new_tokens=_optional(new_tokens, int),
        tau=_optional(tau if tau is not None else row.get("tokens_per_target_forward"), float),
        tokens_per_second=_optional(row.get("decode_tokens_per_s"), float),
        speedup=min(speedups) if speedups else None,  # against the faster vanilla backend
        exact_match=_optional(exactness.get("exact_match") if isinstance(exactness, dict) else None, float),
    )


# ----------------------------------------------------------------------------- hand-written summary
def _from_summary(data: dict, path) -> BenchmarkResults:
    rows = data.get("runs", data.get("results", []))
    runs = tuple(_summary_run(row, path) for row in rows)
    environment = {str(k): v for k, v in (data.get("environment") or {}).items() if v is not None}
    notes = tuple(str(note) for note in data.get("notes") or [])
    return BenchmarkResults(environment, _with_derived_speedups(runs), notes)


def _summary_run(row, path) -> BenchmarkRun:
    if not isinstance(row, dict):
        raise ValueError(f"{path}: every run must be a JSON object, got {row!r}")
    method = _optional(row.get("method"), str)
    return BenchmarkRun(
        method=method,
        is_longspec=(method or "").lower().startswith("longspec"),
        is_baseline=(method or "").lower().startswith("vanilla"),
        task=_optional(row.get("task"), str),
        prompt_tokens=_optional(row.get("prompt_tokens"), int),
        new_tokens=_optional(row.get("new_tokens"), int),
        tau=_optional(row.get("tau"), float),
        tokens_per_second=_optional(row.get("tokens_per_second"), float),
        speedup=_optional(row.get("speedup"), float),
        exact_match=_optional(row.get("exact_match"), float),
    )


def _optional(value, kind):
    return None if value is None else kind(value)


def _with_derived_speedups(runs: tuple[BenchmarkRun, ...]) -> tuple[BenchmarkRun, ...]:
    baseline = {run.setting: run.tokens_per_second for run in runs if run.is_baseline and run.tokens_per_second}
    derived = []
    for run in runs:
        reference = baseline.get(run.setting)
        if run.speedup is None and run.tokens_per_second is not None and reference:
            run = replace(run, speedup=run.tokens_per_second / reference)
        derived.append(run)
    return tuple(derived)
