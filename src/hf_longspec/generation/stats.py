"""Speculation statistics of the last generate() call (``draft.last_stats``)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class LongSpecStats:
    rounds: int = 0
    emitted_tokens: int = 0  # tokens produced by verification rounds (bonus tokens included)
    drafted_nodes: int = 0
    prompt_tokens: int = 0
    new_tokens: int = 0
    non_chain_commits: int = 0  # rounds whose accepted path left the best-ranked child at some depth
    lookup_commits: int = 0  # rounds that kept the prompt-lookup chain's path (longspec_lookup_tokens)
    accepted_lengths: Counter = field(default_factory=Counter)  # tokens per round -> rounds
    # per batch row, the tokens each of its rounds emitted, in order: a round's tokens but its last are the
    # draft's accepted ones, so this says which output positions the draft predicted (only a row's last
    # round can be cut short, by a stop); the histogram cannot say where in the text a round fell
    round_lengths: dict[int, list[int]] = field(default_factory=dict)
    cuda_graphs: bool = False  # whether rounds were replayed as a captured CUDA graph
    host_walked: bool = False  # whether the host walked each tree (processors that read the text, scores)
    compiled: bool = False  # whether the round's drafting ran torch.compile'd code
    verify_compiled: bool = False  # whether its verification forward did (by default: latency-bound targets only)
    compiled_during_call: bool = False  # whether this call built the compiled code (a first call; with "auto", the
    # call whose rounds paid for compiling, or the one after where the switch came after the last round)
    warmup_seconds: float | None = None  # first round of a new decoder, compile included (None: reused one)
    capture_seconds: float | None = None  # CUDA-graph capture time (None: no capture in this call)
    cross_attention_window: int | None = None  # newest target entries the draft read besides its anchors (None: all)
    tree_widths: tuple[int, ...] = ()  # the tree the call drafted, nodes per depth (after any node budget)
    rerank_leaves: bool = False  # whether its last width held the best children of every drafted node
    lookup_tokens: int = 0  # the prompt-lookup chain's length beside it (0: none)
    plain_steps: int = 0  # one-token steps taken instead of rounds, per row (longspec_plain_steps); not in tau
    plain_steps_allowed: bool = False  # whether the call could take them (asked for, or the config's on a CPU)

    @property
    def tau(self) -> float:
        """Mean tokens emitted per target verification forward."""
        return self.emitted_tokens / self.rounds if self.rounds else 0.0

    def histogram(self) -> dict[int, int]:
        return dict(sorted(self.accepted_lengths.items()))

    def as_dict(self) -> dict:
        return {
            "tau": self.tau,
            "rounds": self.rounds,
            "emitted_tokens": self.emitted_tokens,
            "drafted_nodes": self.drafted_nodes,
            "prompt_tokens": self.prompt_tokens,
            "new_tokens": self.new_tokens,
            "non_chain_commits": self.non_chain_commits,
            "lookup_commits": self.lookup_commits,
            "accepted_length_histogram": self.histogram(),
            "cuda_graphs": self.cuda_graphs,
            "host_walked": self.host_walked,
            "compiled": self.compiled,
            "verify_compiled": self.verify_compiled,
            "compiled_during_call": self.compiled_during_call,
            "warmup_seconds": self.warmup_seconds,
            "capture_seconds": self.capture_seconds,
            "cross_attention_window": self.cross_attention_window,
            "tree_widths": list(self.tree_widths),
            "rerank_leaves": self.rerank_leaves,
            "lookup_tokens": self.lookup_tokens,
            "plain_steps": self.plain_steps,
            "plain_steps_allowed": self.plain_steps_allowed,
        }
