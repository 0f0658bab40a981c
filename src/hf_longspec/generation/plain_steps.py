"""When not to speculate: a round or a plain one-token step, chosen by the tokens per second each delivered lately.

A round pays for drafting and for verifying its tree before it emits anything. On the GPU a replayed round costs
about what a plain step costs, so any accepted token is a gain. On a CPU it does not: at 8k tokens on the 2-core
development machine a round verifying 4 nodes took 1.8 plain steps and one verifying 20 took 2.6-2.8, plus 0.5
for drafting (docs/benchmarks.md, "The CPU round at 8k"), so where the draft and the lookup chain keep missing,
speculating is slower than not. ``PlainStepPolicy`` measures both on the running call and takes the faster, with a
round now and then while plain steps lead, since the text may turn predictable again (a repeated block, a copied
passage), and at once when the lookup chain starts guessing the plain steps' tokens. Greedy, each step is the
target's own next token: what is emitted never depends on the choice.

Sampled, each token is the target's own draw, but plain steps and rounds use the random numbers differently, so a
choice made by the clock would give a seeded call other tokens whenever the machine ran a round faster or slower
(``set_seed`` would not reproduce them, as it does vanilla's). A sampled call's policy is therefore priced, not
timed: a plain step costs 1, a round ``SAMPLED_ROUND_COST_STEPS``, and the choices depend on the tokens alone.
"""

from __future__ import annotations

# How quickly the estimates follow the text: the weight of the newest round (or plain step) in its moving average.
NEWEST_WEIGHT = 0.3
# While plain steps lead, one round after this many of them, to see whether the draft hits again; each probe that
# loses doubles the wait, up to PROBE_EVERY_MAX; a round that wins resets it.
PROBE_EVERY = 4
PROBE_EVERY_MAX = 32
# While plain steps lead, a round as soon as the lookup chain's first token was the one taken this many steps in a
# row: the text is copying an earlier passage, which a round's chain takes many tokens at a time.
CHAIN_HITS_FOR_A_ROUND = 2
# What a sampled call prices a round at, in plain steps: the shipped draft's CPU round (the 1-1-1 tree and a 16-token
# chain, 20 rows) took 3.3 (code) and 3.6 (prose) vanilla steps at 4096 tokens on the 2-core development CPU
# (fifty-third session, docs/benchmarks.md "Seeded sampled calls on a CPU"); at 8k its greedy round took 3.1-3.3
# (thirty-eighth session, "The CPU round at 8k").
SAMPLED_ROUND_COST_STEPS = 3.4


class PlainStepPolicy:
    """Per generate() call: ``plain_next()`` says what to run, ``record()`` what it gave (host-side, no sync of its own).

    Rounds start; after the first timed round one plain step is taken to price it, and from then on the faster of
    the two by tokens per second (a round's tokens over its seconds, a plain step's rows over its seconds, each a
    moving average). ``round_cost_steps``: price a round at that many plain steps instead of timing either, so that
    the choices depend on the tokens alone (sampled calls)."""

    def __init__(self, newest_weight: float = NEWEST_WEIGHT, probe_every: int = PROBE_EVERY,
                 probe_every_max: int = PROBE_EVERY_MAX, chain_hits_for_a_round: int = CHAIN_HITS_FOR_A_ROUND,
                 round_cost_steps: float | None = None):
        self.newest_weight, self.probe_every_min, self.probe_every_max = newest_weight, probe_every, probe_every_max
        self.chain_hits_for_a_round = chain_hits_for_a_round
        self.round_cost_steps = round_cost_steps
        self.round_tokens = self.round_seconds = None  # moving averages over timed rounds
        self.step_rate = None  # tokens per second of plain steps (moving average)
        self.probe_every = probe_every
        self.plain_in_a_row = 0
        self.chain_hits_in_a_row = 0  # plain steps whose token the lookup chain guessed, in a row
        self.plain_steps = 0

    def rounds_lead(self) -> bool:
        """Rounds' tokens per second at least plain steps' (or either not timed yet)."""
        return self.step_rate is None or self.round_seconds is None or \
            self.round_tokens / self.round_seconds >= self.step_rate

    def plain_next(self) -> bool:
        if self.round_seconds is None:
            return False  # no timed round yet
        if self.step_rate is None:
            return True  # price a plain step once
        return not self.rounds_lead() and self.chain_hits_in_a_row < self.chain_hits_for_a_round and \
            self.plain_in_a_row < self.probe_every

    def record(self, plain: bool, tokens: int, seconds: float, timed: bool = True, chain_hit: bool = False) -> None:
        """What the step just run emitted over all rows, and its wall-clock seconds (its result read included).
        ``timed`` False: a round that warmed up or captured its decoder, whose seconds say nothing of the next.
        ``chain_hit``: a plain step whose token the lookup chain had guessed (in any row)."""
        if self.round_cost_steps is not None:  # priced: a plain step costs 1, a round round_cost_steps, warm-up or not
            seconds, timed = (1.0 if plain else self.round_cost_steps), True
        if plain:
            self.plain_steps += 1
            self.plain_in_a_row += 1
            self.chain_hits_in_a_row = self.chain_hits_in_a_row + 1 if chain_hit else 0
            self.step_rate = self._average(self.step_rate, tokens / max(seconds, 1e-9))
            return
        probe = self.plain_in_a_row > 0 and not self.rounds_lead()
        self.plain_in_a_row = self.chain_hits_in_a_row = 0
        if not timed:
            return
        self.round_tokens = self._average(self.round_tokens, tokens)
        self.round_seconds = self._average(self.round_seconds, seconds)
        if probe:  # a round while plain steps led: if rounds still lose, wait twice as long before the next
            self.probe_every = self.probe_every_min if self.rounds_lead() else \
                min(2 * self.probe_every, self.probe_every_max)

    def _average(self, old: float | None, new: float) -> float:
        return new if old is None else (1 - self.newest_weight) * old + self.newest_weight * new
