"""Training: Anchor-Offset Indices, Flash Noisy Training, the Trainer loop (CPU smoke run)."""

import json

import pytest
import torch
from transformers import TrainerCallback

from conftest import ByteTokenizer, tiny_llama
from hf_longspec import LongSpecDraftModel
from hf_longspec.training.collator import LongSpecCollator
from hf_longspec.training.positions import anchor_offset_position_ids, noise_shift
from hf_longspec.errors import TrainingRecipeError
from hf_longspec.training.run import TrainRecipe, build_dataset, train_draft


def test_anchor_offset_positions_keep_anchors_and_stay_in_range():
    generator = torch.Generator().manual_seed(0)
    pos = anchor_offset_position_ids(64, 100, max_positions=8192, num_anchors=4, generator=generator)
    assert torch.equal(pos[:, :4], torch.arange(4).expand(64, -1))
    steps = pos[:, 5:] - pos[:, 4:-1]
    assert torch.all(steps == 1)
    assert pos.max() <= 8191 and pos[:, 4].min() >= 4
    assert pos[:, 4].float().std() > 500  # offsets spread over the whole context
    plain = anchor_offset_position_ids(2, 100, 8192, enabled=False)
    assert torch.equal(plain, torch.arange(100).expand(2, -1))


def test_noise_shift_covers_one_to_depth_plus_one():
    generator = torch.Generator().manual_seed(0)
    shifts = {noise_shift(6, generator) for _ in range(300)}
    assert shifts == {1, 2, 3, 4, 5, 6}
    assert noise_shift(6, generator, enabled=False) == 1


def test_collator_draws_positions_and_shift_per_batch():
    collate = LongSpecCollator(max_positions=4096, num_anchors=4, max_noise_shift=6, seed=3)
    batch = collate([{"input_ids": torch.arange(32)} for _ in range(3)])
    assert batch["input_ids"].shape == (3, 32) and batch["position_ids"].shape == (3, 32)
    assert 1 <= int(batch["noise_shift"]) <= 6


def test_noise_shift_hides_the_newest_target_entries():
    """With shift d, the draft's output at i must not depend on target K/V at positions > i - d."""
    target = tiny_llama()
    draft = LongSpecDraftModel.from_target(target)
    ids = torch.randint(0, 96, (1, 16))
    keys, values = torch.randn(1, 2, 16, 16), torch.randn(1, 2, 16, 16)
    with torch.no_grad():
        base = draft(ids, keys, values, noise_shift=3).logits
        keys2 = keys.clone()
        keys2[:, :, 10] += 5.0  # entry 10 is visible to queries i >= 13 only
        moved = draft(ids, keys2, values, noise_shift=3).logits
    changed = (base - moved).abs().amax(dim=-1)[0]
    assert torch.all(changed[:13] == 0) and torch.all(changed[13:] > 0)


def _largest_relative_change(before: dict, after) -> dict:
    """Per parameter: max |after - before| / max(max |before|, 1e-3)."""
    after = dict(after.named_parameters())
    return {name: float((after[name].detach() - value).abs().max() / value.abs().max().clamp(min=1e-3))
            for name, value in before.items()}


def test_trainer_smoke_loss_goes_down_and_resume(tmp_path):
    target = tiny_llama(vocab_size=257, hidden_size=64, layers=2, max_positions=1024, initializer_range=0.2)
    recipe = TrainRecipe(
        output_dir=str(tmp_path / "run"), max_steps=120, seq_len=64, batch_size=8, learning_rate=1e-2,
        warmup_steps=0, max_tokens=80_000, save_steps=60, logging_steps=1, distill="none",
        kinds=["prose"], draft_overrides={"sliding_window": 32},
    )
    initial = LongSpecDraftModel.from_target(target, **recipe.draft_overrides)
    before = {name: p.detach().clone() for name, p in initial.named_parameters()}
    draft = train_draft(target, ByteTokenizer(), recipe, draft=initial, progress=False)
    # training is not a no-op: every parameter moved materially and the loss fell
    changes = _largest_relative_change(before, draft)
    assert min(changes.values()) > 1e-2, sorted(changes.items(), key=lambda item: item[1])[:3]
    final = tmp_path / "run" / "final"
    log = json.loads((final / "training_log.json").read_text())
    losses = [entry["loss"] for entry in log if "loss" in entry]
    assert len(losses) >= 100
    assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10 - 0.3
    assert (final / "model.safetensors").exists() and (tmp_path / "run" / "checkpoint-60").exists()
    # Hub-ready as saved: safetensors weights, no pickles
    assert sorted(p.name for p in final.iterdir()) == [
        "config.json", "model.safetensors", "training_log.json", "training_recipe.json", "training_speed.json"]
    reloaded = LongSpecDraftModel.from_pretrained(final).bind(target)
    assert torch.equal(reloaded.mlp.up_proj.weight, draft.mlp.up_proj.weight)

    # resume continues from the last checkpoint up to the new max_steps
    recipe.max_steps, recipe.resume = 130, True
    train_draft(target, ByteTokenizer(), recipe, progress=False)
    log = json.loads((final / "training_log.json").read_text())
    assert max(entry.get("step", 0) for entry in log) == 130


class _StopAfter(TrainerCallback):
    """Interrupts a run after `step` optimizer steps (the checkpoint of that step is written first)."""

    def __init__(self, step):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step >= self.step:
            control.should_training_stop = True


class _StepsRun(TrainerCallback):
    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


@pytest.mark.parametrize("noisy", [False, True])
def test_resume_continues_from_the_checkpoint_like_an_uninterrupted_run(tmp_path, noisy):
    """24 steps in one go == 12 steps, interrupted, then resumed to 24: the resumed run executes only
    steps 13..24 and ends on the same weights (a different fresh init proves they come from the
    checkpoint, optimizer and scheduler state included)."""
    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)

    def recipe(name):
        return TrainRecipe(
            output_dir=str(tmp_path / name), max_steps=24, seq_len=32, batch_size=4, learning_rate=1e-2,
            warmup_steps=0, max_tokens=20_000, save_steps=12, logging_steps=1, distill="argmax", noisy=noisy,
            kinds=["prose"], draft_overrides={"sliding_window": 16},
        )

    dataset = build_dataset(ByteTokenizer(), recipe("whole"))
    torch.manual_seed(0)
    whole = train_draft(target, ByteTokenizer(), recipe("whole"), progress=False, dataset=dataset)

    interrupted = recipe("interrupted")
    torch.manual_seed(0)
    train_draft(target, ByteTokenizer(), interrupted, progress=False, dataset=dataset, callbacks=[_StopAfter(12)])
    assert (tmp_path / "interrupted" / "checkpoint-12").exists()
    interrupted.resume = True
    steps = _StepsRun()
    torch.manual_seed(1)  # the fresh draft train_draft builds differs from the checkpoint's start
    resumed = train_draft(target, ByteTokenizer(), interrupted, progress=False, dataset=dataset, callbacks=[steps])

    assert steps.steps == list(range(13, 25))
    log = json.loads((tmp_path / "interrupted" / "final" / "training_log.json").read_text())
    assert [entry["step"] for entry in log if "loss" in entry] == list(range(1, 25))
    mine, theirs = resumed.state_dict(), whole.state_dict()
    for name, value in theirs.items():
        assert torch.allclose(mine[name], value, rtol=1e-5, atol=1e-6), (name, (mine[name] - value).abs().max())


def test_max_seconds_stops_every_rank_at_a_saved_checkpoint(tmp_path):
    """--max-seconds: the run stops at the deadline (here after its first step), writes the checkpoint
    of that step to resume from, the final folder, and the speed report."""
    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    recipe = TrainRecipe(
        output_dir=str(tmp_path / "run"), max_steps=50, seq_len=32, batch_size=2, warmup_steps=0,
        max_tokens=20_000, save_steps=10**6, logging_steps=1, kinds=["prose"], max_seconds=1e-6,
        draft_overrides={"sliding_window": 16},
    )
    train_draft(target, ByteTokenizer(), recipe, progress=False)
    assert sorted(p.name for p in (tmp_path / "run").glob("checkpoint-*")) == ["checkpoint-1"]
    speed = json.loads((tmp_path / "run" / "final" / "training_speed.json").read_text())
    assert speed["global_step"] == speed["steps"] == 1 and speed["tokens_per_step"] == 2 * 32
    with pytest.raises(TrainingRecipeError, match="max_seconds"):
        TrainRecipe(output_dir=str(tmp_path / "new"), max_seconds=0).check()
