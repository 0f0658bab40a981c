"""One benchmark run: every method on every prompt, in one process, on one loaded model.

Per prompt length: each method is warmed up on that length's first prompt (kernels, allocator,
Triton specializations for the new shapes), then on every prompt each method generates greedily
with the same max_new_tokens. Wall times are synchronized on CUDA (demo.timed); the prefill time
is measured inside the same call, as the moment the first new token reaches the streamer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from ..demo import timed
from .methods import Method
from .probes import FirstTokenClock, ForwardRecorder, MemoryProbe
from .traffic import decoding_bytes, kv_bytes_per_token, weight_bytes
from .workloads import Workload


@dataclass
class BenchSettings:
    max_new_tokens: int = 128
    warmup_new_tokens: int = 8
    progress: bool = True


@dataclass
class RunRecord:
    """One method on one prompt."""

    method: str
    kind: str
    prompt_index: int
    source: str
    length: int
    new_tokens: int
    wall_s: float
    prefill_s: float  # call start -> first new token(s) on the host
    prefill_tokens: int  # tokens that first delivery held (prompt lookup may verify drafts in its prefill)
    target_forwards: int
    decode_bytes: int
    memory: dict
    longspec_stats: dict | None = None
    tokens: list[int] = field(default_factory=list, repr=False)  # the new tokens

    @property
    def decode_s(self) -> float:
        return self.wall_s - self.prefill_s

    @property
    def decode_tokens(self) -> int:
        return self.new_tokens - self.prefill_tokens

    @property
    def decode_forwards(self) -> int:
        return self.target_forwards - 1

    def as_dict(self) -> dict:
        record = dict(self.__dict__)
        record.update(decode_s=self.decode_s, decode_tokens=self.decode_tokens, decode_forwards=self.decode_forwards)
        return record


def _generate(model, draft, method: Method, ids: torch.Tensor, max_new_tokens: int, clock=None) -> torch.Tensor:
    """One greedy call; the caller has set `method.attn_implementation` on the model (outside the timing)."""
    kwargs = dict(method.generate_kwargs)
    if method.uses_draft:
        kwargs["assistant_model"] = draft
    if clock is not None:
        clock.begin()
    return model.generate(ids, max_new_tokens=max_new_tokens, do_sample=False, streamer=clock, **kwargs)


def _measured_run(model, draft, method: Method, workload: Workload, max_new_tokens: int,
                  recorder: ForwardRecorder, clock: FirstTokenClock) -> RunRecord:
    """One timed call: wall time, in-call prefill time, target forwards, memory, new tokens."""
    device = model.device
    ids = torch.tensor([workload.input_ids], device=device)
    model.set_attn_implementation(method.attn_implementation)
    recorder.reset()
    with MemoryProbe(device) as memory:
        out, wall = timed(lambda: _generate(model, draft, method, ids, max_new_tokens, clock), device)
    new = out[0, ids.shape[1]:].tolist()
    return RunRecord(
        method=method.name, kind=workload.kind, prompt_index=workload.index, source=workload.source,
        length=workload.length, new_tokens=len(new), wall_s=wall,
        prefill_s=clock.prefill_seconds or wall, prefill_tokens=clock.first_tokens,
        # a captured round replays without calling the model: count LongSpec forwards from its stats
        target_forwards=1 + draft.last_stats.rounds if method.uses_draft else len(recorder.forwards),
        decode_bytes=decoding_bytes(recorder.forwards, weight_bytes(model), kv_bytes_per_token(model)),
        memory=memory.result,
        longspec_stats=draft.last_stats.as_dict() if method.uses_draft else None,
        tokens=new,
    )


def run_methods(model, draft, methods: list[Method], workloads: list[Workload],
                settings: BenchSettings) -> list[RunRecord]:
    """Run every method on every workload; the model's attention implementation is restored after."""
    original_attention = model.config._attn_implementation
    lengths = sorted({w.length for w in workloads})
    records: list[RunRecord] = []
    clock = FirstTokenClock()
    bar = tqdm(total=(len(lengths) + len(workloads)) * len(methods), desc="bench",
               disable=not settings.progress, dynamic_ncols=True)
    try:
        with ForwardRecorder(model) as recorder:
            for length in lengths:
                batch = [w for w in workloads if w.length == length]
                first = torch.tensor([batch[0].input_ids], device=model.device)
                for method in methods:
                    bar.set_description(f"warm-up {length} {method.name}")
                    model.set_attn_implementation(method.attn_implementation)
                    _generate(model, draft, method, first, settings.warmup_new_tokens)
                    bar.update()
                for workload in batch:
                    for method in methods:
                        bar.set_description(f"{length} {workload.name} {method.name}")
                        records.append(_measured_run(model, draft, method, workload, settings.max_new_tokens,
                                                     recorder, clock))
                        bar.update()
    finally:
        bar.close()
        model.set_attn_implementation(original_attention)
    return records
