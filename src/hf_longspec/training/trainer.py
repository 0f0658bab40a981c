"""LongSpecTrainer: transformers' Trainer with a frozen target that supplies K/V (and labels).

The target is an attribute of the trainer, not a submodule of the draft, so it is neither
optimized nor saved; the draft borrows its embeddings and LM head through `bind`. Under DDP and
FSDP the target stays replicated: every rank holds all of it (see docs/distributed.md).
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings

import torch
from transformers import Trainer, TrainerCallback

from ..target_support import cache_argument_name, target_layers_kv

DISTILL_MODES = ("none", "argmax", "soft")


class LongSpecTrainer(Trainer):
    """Trains a bound LongSpecDraftModel. `distill`: 'none' = labels are the text's next tokens;
    'argmax' = labels are the target's own greedy predictions (what verification accepts);
    'soft' = labels are the target's whole next-token distribution (as EAGLE-3 / SpecForge train):
    it also teaches the draft the target's runners-up, which the tree's top-k children draft.
    `rollout_steps` K > 1: multi-step rollout (the draft also trains on its own predictions for
    depths 2..K, `LongSpecDraftModel._rollout`), losses weighted by `rollout_decay` ** (k - 1);
    each step's loss is logged as `loss_step_k`."""

    def __init__(self, *args, target, distill: str = "argmax", rollout_steps: int = 1, rollout_decay: float = 0.8,
                 **kwargs):
        if distill not in DISTILL_MODES:
            raise ValueError(f"distill={distill!r}; allowed: {DISTILL_MODES}")
        if isinstance(rollout_steps, bool) or not isinstance(rollout_steps, int) or rollout_steps < 1:
            raise ValueError(f"rollout_steps={rollout_steps!r}; allowed: an int >= 1")
        super().__init__(*args, **kwargs)
        self.args.remove_unused_columns = False
        self.target = target.eval().requires_grad_(False)
        self.distill = distill
        self.rollout_steps, self.rollout_decay = rollout_steps, rollout_decay
        self._step_loss_sum, self._step_loss_count = None, 0  # per-step losses since the last log
        if hasattr(self.data_collator, "restore"):
            self.add_callback(_RestoreCollator(self.data_collator, self.args.gradient_accumulation_steps))
        if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true" and not self.is_fsdp_enabled:
            warnings.warn("FSDP was requested (accelerate config) but accelerate did not enable it (it runs FSDP "
                          "configs as plain DDP on CPU processes): the draft is replicated, not sharded.")
        self._draft_autocast = contextlib.nullcontext
        if self.is_fsdp_enabled and getattr(self.accelerator.state.fsdp_plugin, "fsdp_version", 1) == 2:
            from torch.distributed.fsdp import MixedPrecisionPolicy

            # fp32 parameters and fp32 gradient reduction, bf16 compute through autocast: what DDP does,
            # so FSDP trains the same draft as DP. accelerate's FSDP2 default instead casts the weights
            # to bf16 and reduces in bf16, and it does not autocast the forward under FSDP2, so
            # compute_loss does (a no-op without mixed precision).
            self.accelerator.state.fsdp_plugin.mixed_precision_policy = MixedPrecisionPolicy()
            self._draft_autocast = self.accelerator.autocast

    def train(self, *args, **kwargs):
        """Under FSDP2, accelerate shards `model.get_input_embeddings()` as a unit of its own; the
        draft's is the target's borrowed embedding, which must stay whole and replicated, so it is
        hidden from accelerate while training (an instance attribute shadows the method)."""
        draft = _unwrap(self.model)
        if not self.is_fsdp_enabled:
            return super().train(*args, **kwargs)
        draft.get_input_embeddings = lambda: None
        try:
            return super().train(*args, **kwargs)
        finally:
            del draft.get_input_embeddings

    @torch.no_grad()
    def target_signals(self, model, input_ids, position_ids):
        """The K/V of the target layers the draft reads for these positions (side by side on the head
        axis when it reads several), and the labels to train on."""
        from transformers import DynamicCache

        cache = DynamicCache(config=self.target.config)
        out = self.target(
            input_ids=input_ids,
            position_ids=position_ids,
            use_cache=True,
            logits_to_keep=1 if self.distill == "none" else 0,
            **{cache_argument_name(self.target): cache},
        )
        keys, values = target_layers_kv(cache, _unwrap(model).target_layers)
        if self.distill == "argmax":
            labels = torch.full_like(input_ids, -100)
            labels[:, 1:] = out.logits[:, :-1].argmax(dim=-1)
        elif self.distill == "soft":
            # labels[i] = the target's distribution of token i (position 0 has none: zeros, never read)
            # (kept in the target's dtype: bf16 on the GPU halves the B x S x vocab tensor)
            probs = out.logits[:, :-1].softmax(dim=-1, dtype=torch.float32).to(out.logits.dtype)
            labels = torch.nn.functional.pad(probs, (0, 0, 1, 0))
        else:
            labels = input_ids
        return keys, values, labels

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        input_ids, position_ids = inputs["input_ids"], inputs["position_ids"]
        keys, values, labels = self.target_signals(model, input_ids, position_ids)
        if "loss_mask" in inputs:  # chat_loss="answer": a record's prompt tokens are not trained on
            if labels.is_floating_point():
                raise ValueError("a loss mask needs token labels (distill 'argmax' or 'none'), not soft labels")
            labels = labels.masked_fill(~inputs["loss_mask"], -100)
        rollout = {"rollout_steps": self.rollout_steps, "rollout_decay": self.rollout_decay} \
            if self.rollout_steps > 1 else {}  # K = 1: the call (and the loss) of plain training, unchanged
        with self._draft_autocast():
            out = model(
                input_ids=input_ids,
                target_keys=keys,
                target_values=values,
                position_ids=position_ids,
                noise_shift=int(inputs["noise_shift"]),
                labels=labels,
                **rollout,
            )
        if getattr(out, "step_losses", None) is not None and model.training:
            losses = out.step_losses.detach()
            self._step_loss_sum = losses if self._step_loss_sum is None else self._step_loss_sum + losses
            self._step_loss_count += 1
        return (out.loss, out) if return_outputs else out.loss

    def log(self, logs: dict, *args, **kwargs) -> None:
        """Adds each rollout step's loss (mean over the batches since the last log, and over ranks)
        next to `loss`: whether the draft learns its deeper, self-fed steps shows here. Every rank
        logs (the Trainer calls log on all of them), so the gather below is a collective they all join."""
        if "loss" in logs and self._step_loss_count:
            from transformers.trainer_pt_utils import nested_gather

            means = self._step_loss_sum / self._step_loss_count
            means = nested_gather(means[None], self.args.parallel_mode).mean(dim=0)
            logs.update({f"loss_step_{k}": float(value) for k, value in enumerate(means.tolist(), start=1)})
            self._step_loss_sum, self._step_loss_count = None, 0
        super().log(logs, *args, **kwargs)


class _RestoreCollator(TrainerCallback):
    """At train start (after a checkpoint's state is loaded) give the collator the batch and epoch
    counts of the restored state, so a resumed run draws the same positions and noise shifts as an
    uninterrupted one."""

    def __init__(self, collator, grad_accum: int):
        self.collator, self.grad_accum = collator, grad_accum

    def on_train_begin(self, args, state, control, **kwargs):
        self.collator.restore(state.global_step * self.grad_accum, int(state.epoch or 0))


class StopAtDeadline(TrainerCallback):
    """Stop after `seconds` of training and save a checkpoint there, so a run longer than one machine's
    lease continues elsewhere with --resume. Every rank stops at the same step: rank 0's clock
    decides, broadcast after each step (one number; a stop on one rank alone would hang the others)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.start = None

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.monotonic()

    def on_step_end(self, args, state, control, **kwargs):
        late = time.monotonic() - self.start >= self.seconds
        if args.world_size > 1 and torch.distributed.is_initialized():
            flag = torch.tensor([float(late)], device=args.device)
            torch.distributed.broadcast(flag, src=0)
            late = bool(flag.item())
        if late:
            control.should_training_stop = True
            control.should_save = True


class SpeedLog(TrainerCallback):
    """Step end times and peak GPU memory, for final/training_speed.json: throughput after the first
    `warmup` steps (allocator growth, first collectives), which a Trainer's train_runtime includes."""

    def __init__(self, tokens_per_step: int, warmup: int = 5):
        self.tokens_per_step, self.warmup = tokens_per_step, warmup
        self.times: list[float] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.times = [time.perf_counter()]
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter())

    def report(self) -> dict:
        """Every rank must call it (it gathers each rank's peak memory)."""
        steps = len(self.times) - 1
        warmup = min(self.warmup, max(steps - 1, 0))
        seconds = self.times[-1] - self.times[warmup] if steps else 0.0
        timed = steps - warmup
        peak = torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_available() else None
        peaks = [peak]
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            peaks = [None] * torch.distributed.get_world_size()
            torch.distributed.all_gather_object(peaks, peak)
        return {
            "steps": steps, "warmup_steps_excluded": warmup, "timed_steps": timed, "timed_seconds": seconds,
            "seconds_per_step": seconds / timed if timed else None,
            "tokens_per_step": self.tokens_per_step,
            "tokens_per_second": timed * self.tokens_per_step / seconds if timed and seconds else None,
            "all_steps_seconds": self.times[-1] - self.times[0],
            "peak_gpu_memory_gib_per_rank": peaks,
        }


def _unwrap(model):
    while hasattr(model, "module"):
        model = model.module
    return model
