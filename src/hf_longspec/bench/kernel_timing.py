"""One timer for the kernel benchmarks (attention_bench, attention_tiles), so that their numbers
mean the same thing: triton's do_bench median on the GPU (L2 flushed between repetitions), a
median of a few wall-clock calls on the CPU, where the interpreter only shows that a run works."""

from __future__ import annotations

import statistics
import time

import torch


def median_time_us(call, device: torch.device, *, warmup: int = 25, rep_ms: int = 100, cpu_repeats: int = 3) -> float:
    """Microseconds per call of `call()` (after one untimed call on the CPU)."""
    if device.type == "cuda":
        from triton.testing import do_bench

        return do_bench(call, warmup=warmup, rep=rep_ms, return_mode="median") * 1e3
    call()
    samples = []
    for _ in range(cpu_repeats):
        begin = time.perf_counter()
        call()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples) * 1e6
