"""What one generate() call did: when its first token came, the target forwards it ran, and the
memory it took.

Forwards are counted with a forward pre-hook on the target model itself, so the count is the
same for every method (vanilla, prompt lookup, LongSpec) without touching their code: the first
forward of a call is the prefill, each later one is a decoding/verification step.
"""

from __future__ import annotations

import os
import time

import torch
from transformers.generation.streamers import BaseStreamer

from ..target_support import cache_from_model_kwargs


class FirstTokenClock(BaseStreamer):
    """A streamer that notes when the first new token(s) reached the host: the prefill time,
    measured inside the timed call itself (every method streams; `.cpu()` in put syncs CUDA).

    generate() puts the prompt first, then new tokens; prompt lookup may deliver several at once.
    """

    def __init__(self):
        self.start: float | None = None
        self.first_token_at: float | None = None
        self.first_tokens = 0
        self._puts = 0

    def begin(self) -> None:
        self.start, self.first_token_at, self.first_tokens, self._puts = time.perf_counter(), None, 0, 0

    def put(self, value) -> None:
        self._puts += 1
        if self._puts == 2:
            self.first_token_at = time.perf_counter()
            self.first_tokens = int(value.numel())

    def end(self) -> None:
        pass

    @property
    def prefill_seconds(self) -> float | None:
        return None if self.first_token_at is None else self.first_token_at - self.start


class ForwardRecorder:
    """Records (cached tokens, new tokens) for every forward of `model` while attached."""

    def __init__(self, model):
        self.forwards: list[tuple[int, int]] = []
        self._handle = model.register_forward_pre_hook(self._record, with_kwargs=True)

    def _record(self, module, args, kwargs):
        tokens = kwargs.get("input_ids")
        if tokens is None:
            tokens = args[0] if args else kwargs.get("inputs_embeds")
        cache = cache_from_model_kwargs(kwargs)
        cached = cache.get_seq_length() if cache is not None else 0
        self.forwards.append((int(cached), int(tokens.shape[1])))

    def reset(self) -> None:
        self.forwards = []

    def close(self) -> None:
        self._handle.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _rss_bytes() -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    return psutil.Process(os.getpid()).memory_info().rss


class MemoryProbe:
    """Peak memory of one call: CUDA peak allocated (and the part above what was already held);
    on the CPU only the process RSS change is available (allocator reuse makes it a rough hint)."""

    def __init__(self, device: torch.device):
        self.device = torch.device(device)
        self.result: dict = {}

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._before = torch.cuda.memory_allocated(self.device)
        else:
            self._before = _rss_bytes()
        return self

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
            self.result = {"kind": "cuda_peak_allocated", "peak_bytes": peak, "extra_peak_bytes": peak - self._before}
        else:
            after = _rss_bytes()
            delta = None if after is None or self._before is None else after - self._before
            self.result = {"kind": "cpu_rss_delta", "peak_bytes": None, "rss_delta_bytes": delta}


def copy_bandwidth(device: torch.device, nbytes: int | None = None, repeats: int = 5) -> dict:
    """Device-to-device copy rate of a large buffer: (bytes read + bytes written) / second.

    The same convention as benchmarks/attention_bench.py; 2 GiB on CUDA, 64 MiB elsewhere.
    """
    from ..demo import timed

    device = torch.device(device)
    nbytes = nbytes or ((2 << 30) if device.type == "cuda" else (64 << 20))
    source = torch.empty(nbytes // 2, dtype=torch.bfloat16, device=device).normal_()
    target = torch.empty_like(source)
    target.copy_(source)  # warm-up
    seconds = min(timed(lambda: target.copy_(source), device)[1] for _ in range(repeats))
    return {"bytes": nbytes, "seconds": seconds, "bytes_per_s": 2 * nbytes / seconds}
