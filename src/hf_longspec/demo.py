"""The main job: a real long prompt through vanilla and LongSpec generate, side by side.

Vanilla is timed as its users run it fastest: ``generate(..., cache_implementation="static")``, a preallocated cache
that transformers compiles on accelerators (on a CPU it runs eager; nothing faster ships there)."""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import torch

from .bench.probes import FirstTokenClock
from .corpus import long_prompt_ids
from .embedded import load_embedded_draft, load_embedded_target
from .errors import CommandLineError
from .modeling_longspec import LongSpecDraftModel


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device):
    synchronize(device)
    start = time.perf_counter()
    result = fn()
    synchronize(device)
    return result, time.perf_counter() - start


def timed_generate(generate, device):
    """(output, seconds, prefill seconds) of ``generate(streamer)``: the prefill is the time to the first new token,
    measured inside the timed call itself."""
    clock = FirstTokenClock()
    synchronize(device)
    clock.begin()
    output, seconds = timed(lambda: generate(clock), device)
    return output, seconds, clock.prefill_seconds


@dataclass
class RunReport:
    prompt_tokens: int
    new_tokens: int
    vanilla_prefill_seconds: float  # each call's time to its first new token, measured inside the timed call
    longspec_prefill_seconds: float
    vanilla_seconds: float
    longspec_seconds: float
    identical: bool
    stats: dict
    draft_source: str
    dtype: str = "float32"
    baseline: str = "static cache"  # how vanilla ran: the fastest way its users run it on this device

    def decode_rate(self, seconds: float, prefill_seconds: float) -> float:
        """New tokens per second after the call's own prefill (its first new token)."""
        return (self.new_tokens - 1) / max(seconds - prefill_seconds, 1e-9)

    def lines(self) -> list[str]:
        vanilla = self.decode_rate(self.vanilla_seconds, self.vanilla_prefill_seconds)
        longspec = self.decode_rate(self.longspec_seconds, self.longspec_prefill_seconds)
        return [
            f"prompt: {self.prompt_tokens} tokens of local text; new tokens: {self.new_tokens}; draft: {self.draft_source}",
            f"prefill (to the first new token, each call its own): vanilla {self.vanilla_prefill_seconds:.2f} s, "
            f"LongSpec {self.longspec_prefill_seconds:.2f} s",
            f"vanilla generate : {self.vanilla_seconds:7.2f} s total, {vanilla:8.2f} tokens/s after prefill"
            f"   ({self.baseline})",
            f"LongSpec generate: {self.longspec_seconds:7.2f} s total, {longspec:8.2f} tokens/s after prefill",
            f"speedup after prefill: {longspec / vanilla:.2f}x vanilla static"
            f"   tau (tokens per target forward): {self.stats['tau']:.2f}"
            f"   rounds: {self.stats['rounds']}"
            + (f"   kept the lookup chain: {self.stats['lookup_commits']}" if self.stats.get("lookup_commits") else "")
            + (f"   plain steps (one token each, where rounds lost; not in tau): {self.stats['plain_steps']}"
               if self.stats.get("plain_steps_allowed") or self.stats.get("plain_steps") else ""),
            self.tree_line(),
            f"accepted length histogram: {self.stats['accepted_length_histogram']}",
            f"output identical to vanilla greedy: {'yes' if self.identical else 'NO'}"
            + ("" if self.identical or self.dtype == "float32" else
               f" (in {self.dtype} a tree forward rounds differently from one-token forwards and near-tied"
               " tokens can flip; --dtype float32 checks exactness)"),
        ]

    def tree_line(self) -> str:
        """The tree and chain the call drafted (after any node budget); none when it ran without speculation."""
        if not self.stats["tree_widths"]:
            return "tree: none (the call decoded without speculation)"
        chain = self.stats["lookup_tokens"]
        return (f"tree: {'-'.join(map(str, self.stats['tree_widths']))} nodes per depth"
                + (", its leaves re-ranked over every drafted node" if self.stats.get("rerank_leaves") else "")
                + (f", and a {chain}-token prompt-lookup chain" if chain else ""))

    @property
    def failed(self) -> bool:
        """Only a float32 mismatch is a defect; bf16/fp16 rounding can flip near-ties."""
        return not self.identical and self.dtype == "float32"


def load_draft_for(target, draft: str) -> tuple[LongSpecDraftModel, str]:
    """'embedded' (the shipped trained draft; untrained if none ships), 'untrained', or a folder."""
    if draft == "untrained":
        return LongSpecDraftModel.from_target(target).eval(), "untrained (random init)"
    if draft == "embedded":
        try:
            return load_embedded_draft(target), "shipped SmolLM2 draft"
        except FileNotFoundError:
            warnings.warn("no trained draft ships with this install; using an untrained draft (tau ~ 1)")
            return LongSpecDraftModel.from_target(target).eval(), "untrained (no shipped draft found)"
    reference = target.get_input_embeddings().weight
    loaded = LongSpecDraftModel.from_pretrained(draft, dtype=reference.dtype).to(reference.device).eval()
    return loaded.bind(target), draft


def check_positions(target, prompt_tokens: int, max_new_tokens: int) -> None:
    """Refuse a job longer than the target's positions before any call runs: vanilla's calls would run past the
    limit first (transformers only warns), and LongSpec's refuse it last."""
    positions = target.config.get_text_config().max_position_embeddings
    if prompt_tokens + max_new_tokens > positions:
        raise CommandLineError(
            f"--prompt-tokens {prompt_tokens} + --max-new-tokens {max_new_tokens} = {prompt_tokens + max_new_tokens} "
            f"positions exceeds the target's max_position_embeddings ({positions}); allowed: a sum of at most "
            f"{positions}.")


def run_main_job(prompt_tokens: int = 4000, max_new_tokens: int = 128, kind: str = "code", draft: str = "embedded",
                 device: str | None = None, seed: int = 0, dtype: str | None = None,
                 lookup_tokens: int | None = None, cross_attention_window: int | None = None,
                 tree_widths: list[int] | None = None, plain_steps: bool | None = None,
                 rerank_leaves: bool | None = None) -> RunReport:
    target, tokenizer = load_embedded_target(device=device, dtype=getattr(torch, dtype) if dtype else None)
    check_positions(target, prompt_tokens, max_new_tokens)
    device = target.device
    drafter, source = load_draft_for(target, draft)
    ids = torch.tensor([long_prompt_ids(tokenizer, prompt_tokens, kind=kind, split="eval", seed=seed)], device=device)
    common = dict(max_new_tokens=max_new_tokens, do_sample=False)
    static = dict(cache_implementation="static")
    speculation = dict(assistant_model=drafter, longspec_lookup_tokens=lookup_tokens,
                       longspec_cross_attention_window=cross_attention_window, longspec_tree_widths=tree_widths,
                       longspec_plain_steps=plain_steps, longspec_rerank_leaves=rerank_leaves)
    compiled = device.type != "cpu"  # transformers compiles a static cache's decoding step on accelerators only
    # warm-up: kernels and allocator; on an accelerator both calls at this call's shapes, so that neither timed call
    # pays a compile or a capture (a server's first call would have)
    warm_up = ids if compiled else ids[:, :64]
    target.generate(warm_up, max_new_tokens=max_new_tokens if compiled else 4, do_sample=False, **static)
    target.generate(warm_up, max_new_tokens=max_new_tokens if compiled else 8, do_sample=False, **speculation)
    vanilla, vanilla_seconds, vanilla_prefill = timed_generate(
        lambda streamer: target.generate(ids, **common, **static, streamer=streamer), device)
    speculative, longspec_seconds, longspec_prefill = timed_generate(
        lambda streamer: target.generate(ids, **speculation, **common, streamer=streamer), device)
    window = drafter.last_stats.cross_attention_window  # what the call read, whoever asked for it
    if window is not None:
        source += f" (reading the target's first {drafter.config.num_anchor_tokens} and newest {window} cache entries)"
    return RunReport(
        prompt_tokens=ids.shape[1],
        new_tokens=speculative.shape[1] - ids.shape[1],
        vanilla_prefill_seconds=vanilla_prefill,
        longspec_prefill_seconds=longspec_prefill,
        vanilla_seconds=vanilla_seconds,
        longspec_seconds=longspec_seconds,
        identical=torch.equal(vanilla, speculative),
        stats=drafter.last_stats.as_dict(),
        draft_source=source,
        dtype=str(target.dtype).removeprefix("torch."),
        baseline="static cache, compiled by transformers" if compiled else "static cache, eager: transformers "
                 "compiles it on accelerators only",
    )
