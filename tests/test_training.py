"""Training: Anchor-Offset Indices, Flash Noisy Training, the Trainer loop (CPU smoke run)."""

import copy
import importlib.util
import json
from pathlib import Path
import re
from dataclasses import asdict

import pytest
import torch
from transformers import TrainerCallback

from conftest import ByteTokenizer, load_script, tiny_llama
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


def test_noise_shift_weights_draw_each_shift_in_proportion():
    """Weights for shifts 1, 2, ...: a shift of weight 0 never comes, the others in proportion (4000 draws,
    the expected share within 0.03); off is shift 1 whatever the weights."""
    generator = torch.Generator().manual_seed(0)
    assert {noise_shift(6, generator, weights=(0, 0, 1)) for _ in range(50)} == {3}
    draws = [noise_shift(6, generator, weights=(3, 0, 0, 0, 1)) for _ in range(4000)]
    assert set(draws) == {1, 5} and abs(draws.count(1) / len(draws) - 0.75) < 0.03
    assert noise_shift(6, generator, enabled=False, weights=(0, 1)) == 1
    collate = LongSpecCollator(max_positions=4096, num_anchors=4, max_noise_shift=6, seed=3,
                               noise_shift_weights=(1.0, 0.0, 1.0))
    shifts = {int(collate([{"input_ids": torch.arange(32)}])["noise_shift"]) for _ in range(60)}
    assert shifts == {1, 3}


def test_training_draws_the_recipes_noise_shift_weights(tmp_path, monkeypatch):
    """A run's every step trains at a shift its noise_shift_weights allow (weight only on shift 4 here)."""
    from hf_longspec.training.trainer import LongSpecTrainer

    seen, compute_loss = [], LongSpecTrainer.compute_loss

    def recording(self, model, inputs, *args, **kwargs):
        seen.append(int(inputs["noise_shift"]))
        return compute_loss(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(LongSpecTrainer, "compute_loss", recording)
    target = tiny_llama(vocab_size=257, hidden_size=64, layers=2, max_positions=1024)
    recipe = TrainRecipe(output_dir=str(tmp_path / "run"), max_steps=4, seq_len=64, batch_size=2, max_tokens=20_000,
                         save_steps=100, distill="none", kinds=["prose"], noise_shift_weights=[0, 0, 0, 1])
    train_draft(target, ByteTokenizer(), recipe, progress=False)
    assert seen == [4] * 4


def test_recipe_refuses_noise_shift_weights_that_draw_nothing_or_contradict_noisy_off(tmp_path):
    from hf_longspec.cli import build_parser

    good = dict(output_dir=str(tmp_path / "run"), noise_shift_weights=[1.0, 0.78, 0.64, 0.49, 0.38])
    TrainRecipe(**good).check()
    for bad in ([], [0, 0], [1, -1], [1, float("nan")], [True], "1,2", [1.0] * 64):
        with pytest.raises(TrainingRecipeError, match=r"noise_shift_weights=.*; allowed: None .* shorter than seq_len"):
            TrainRecipe(**{**good, "noise_shift_weights": bad, "seq_len": 64}).check()
    with pytest.raises(TrainingRecipeError, match="with noisy=False.*Allowed: one of them"):
        TrainRecipe(**good, noisy=False).check()
    args = build_parser().parse_args(["train", "--output", "x", "--noise-shift-weights", "1", "0.5"])
    assert args.noise_shift_weights == [1.0, 0.5]
    assert build_parser().parse_args(["train", "--output", "x"]).noise_shift_weights is None


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


def _kl_target_to_draft(target, draft, ids) -> float:
    """Mean over positions of KL(target's next-token distribution || the draft's), shift 1."""
    import torch.nn.functional as F
    from transformers import DynamicCache

    from hf_longspec.target_support import cache_argument_name, target_layer_kv

    with torch.no_grad():
        cache = DynamicCache(config=target.config)
        target_logits = target(ids, use_cache=True, **{cache_argument_name(target): cache}).logits
        keys, values = target_layer_kv(cache, draft.target_layer_index)
        draft_logits = draft(ids, keys, values, noise_shift=1).logits
    return float(F.kl_div(draft_logits.log_softmax(-1), target_logits.log_softmax(-1), log_target=True,
                          reduction="none").sum(-1).mean())


def test_soft_distillation_trains_on_the_targets_whole_distribution(tmp_path):
    """distill="soft": the labels are the target's next-token probabilities (position 0 none), the loss
    is -sum p log q over them, and training on it brings the draft's distribution closer to the
    target's (KL) than the same run on the target's argmax does."""
    import torch.nn.functional as F
    from transformers import TrainingArguments

    from hf_longspec.training.trainer import LongSpecTrainer

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    draft = LongSpecDraftModel.from_target(target, sliding_window=16)
    args = TrainingArguments(output_dir=str(tmp_path / "args"), use_cpu=True, report_to="none")
    soft = LongSpecTrainer(model=draft, args=args, target=target, distill="soft")
    hard = LongSpecTrainer(model=draft, args=args, target=target, distill="argmax")
    ids = torch.randint(0, 257, (2, 24), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(24)[None].expand(2, -1)
    keys, values, probs = soft.target_signals(draft, ids, positions)
    _, _, argmax = hard.target_signals(draft, ids, positions)
    with torch.no_grad():
        expected = target(ids).logits[:, :-1].softmax(-1)
    assert probs.shape == (2, 24, 257) and torch.all(probs[:, 0] == 0)
    assert torch.allclose(probs[:, 1:], expected, atol=1e-6)
    assert torch.equal(probs[:, 1:].argmax(-1), argmax[:, 1:])
    # the loss the trainer optimizes is the cross-entropy against those probabilities
    soft.target_signals = lambda model, input_ids, position_ids: (keys, values, probs)
    loss = soft.compute_loss(draft, {"input_ids": ids, "position_ids": positions, "noise_shift": torch.tensor(1)})
    logits = draft(ids, keys, values, positions, noise_shift=1).logits
    by_hand = -(expected * logits[:, :-1].float().log_softmax(-1)).sum(-1).mean()
    assert torch.allclose(loss, by_hand, rtol=1e-5, atol=0)

    def train(distill):
        recipe = TrainRecipe(
            output_dir=str(tmp_path / distill), max_steps=40, seq_len=32, batch_size=4, learning_rate=1e-2,
            warmup_steps=0, max_tokens=20_000, save_steps=10**6, logging_steps=1, distill=distill,
            kinds=["prose"], draft_overrides={"sliding_window": 16},
        )
        torch.manual_seed(0)
        return train_draft(target, ByteTokenizer(), recipe, progress=False)

    start = _kl_target_to_draft(target, LongSpecDraftModel.from_target(target, sliding_window=16).bind(target), ids)
    soft_kl, argmax_kl = (_kl_target_to_draft(target, train(distill), ids) for distill in ("soft", "argmax"))
    assert soft_kl < start - 0.1 and soft_kl < argmax_kl - 0.05, (start, soft_kl, argmax_kl)
    recorded = json.loads((tmp_path / "soft" / "final" / "training_recipe.json").read_text())
    assert recorded["distill"] == "soft"


def _answered_records(path, count=12, seed=0):
    """Chat records whose prompt tokens are 1..99 and answer tokens 100..199 (prompt_tokens says where
    the answer starts), so a batch's tokens tell prompt from answer."""
    generator = torch.Generator().manual_seed(seed)
    lines = []
    for _ in range(count):
        prompt, answer = (int(n) for n in torch.randint(8, 40, (2,), generator=generator))
        ids = torch.cat([torch.randint(1, 100, (prompt,), generator=generator),
                         torch.randint(100, 200, (answer,), generator=generator)]).tolist()
        lines.append(json.dumps({"input_ids": ids, "split": "train", "prompt_tokens": prompt}) + "\n")
    path.write_text("".join(lines))
    return path


def test_data_cache_gives_the_same_chunks_without_tokenizing_and_never_a_stale_entry(tmp_path, monkeypatch):
    """--data-cache: a second start with the same data loads the first start's chunks (text, sources,
    prompt mask and mix report identical) without tokenizing; settings that do not touch the data share
    the entry; another seed, or a source file that changed, makes a new one (tokenized again)."""
    from dataclasses import replace

    from hf_longspec.training import data

    records = _answered_records(tmp_path / "records.jsonl", count=30)
    cache = tmp_path / "cache"
    recipe = TrainRecipe(output_dir=str(tmp_path / "run"), seq_len=32, max_tokens=4000, corpus_mix="prose=0.5,chat=0.5",
                         chat_data=[str(records)], chat_windows="end", corpus_max_epochs=3.0, data_cache=str(cache))
    first = build_dataset(ByteTokenizer(), recipe)
    assert len(list(cache.glob("chunks-*.pt"))) == 1 and not list(cache.glob("*.partial"))

    def no_tokenizing(*args, **kwargs):
        raise RuntimeError("tokenized again")

    monkeypatch.setattr(data, "_encode_all", no_tokenizing)
    again = build_dataset(ByteTokenizer(), replace(recipe, learning_rate=5e-4, max_steps=7, output_dir="other"))
    assert again.chunks.dtype == first.chunks.dtype == torch.long and torch.equal(again.chunks, first.chunks)
    assert torch.equal(again.chunk_sources, first.chunk_sources) and torch.equal(again.prompt_mask, first.prompt_mask)
    assert again.source_names == first.source_names and again.mix_report == first.mix_report
    assert (again.seq_len, again.chat_windows) == (first.seq_len, first.chat_windows) == (32, "end")
    assert again[3]["input_ids"].tolist() == first[3]["input_ids"].tolist()
    # the kinds given beside a mix are not read, so they share the entry
    build_dataset(ByteTokenizer(), replace(recipe, kinds=["code"]))

    class OtherTokenizer(ByteTokenizer):
        def __len__(self):
            return 300

    for changed in (replace(recipe, seed=1), replace(recipe, seq_len=48)):
        with pytest.raises(RuntimeError, match="tokenized again"):
            build_dataset(ByteTokenizer(), changed)
    with pytest.raises(RuntimeError, match="tokenized again"):
        build_dataset(OtherTokenizer(), recipe)
    records.write_text(records.read_text() + records.read_text().splitlines(keepends=True)[0])
    with pytest.raises(RuntimeError, match="tokenized again"):
        build_dataset(ByteTokenizer(), recipe)
    monkeypatch.undo()
    changed = build_dataset(ByteTokenizer(), recipe)
    assert len(list(cache.glob("chunks-*.pt"))) == 2 and changed.mix_report["chat"]["documents"] == 31
    # a truncated entry is tokenized again and replaced, with a warning
    entry = max(cache.glob("chunks-*.pt"), key=lambda path: path.stat().st_mtime_ns)
    entry.write_bytes(entry.read_bytes()[:100])
    with pytest.warns(UserWarning, match="could not be read"):
        rebuilt = build_dataset(ByteTokenizer(), recipe)
    assert torch.equal(rebuilt.chunks, changed.chunks) and entry.stat().st_size > 100


def test_data_cache_sees_a_changed_corpus_file_and_caches_the_kinds_loader(tmp_path, monkeypatch):
    """A corpus file that changes (here a copyright file of a /usr/share tree read through
    HF_LONGSPEC_USR_SHARE) makes a new entry; the original kinds loader (no mix, no prompt mask, no
    mix report) is cached and loaded like a mix."""
    from dataclasses import replace

    from hf_longspec import corpus
    from hf_longspec.training import data

    share = tmp_path / "share"
    for tool in range(6):
        (share / "doc" / f"tool{tool}").mkdir(parents=True)
        (share / "doc" / f"tool{tool}" / "copyright").write_text(f"Copyright {tool} The Authors. " * 200)
    trained = [key for key in (f"doc/tool{tool}/copyright" for tool in range(6)) if corpus.split_of(key) == "train"]
    monkeypatch.setenv(corpus.USR_SHARE_ENV, str(share))
    corpus.clear_caches()
    try:
        recipe = TrainRecipe(output_dir="", seq_len=32, max_tokens=2000, corpus_mix="licenses=1",
                             data_cache=str(tmp_path / "cache"))
        first = build_dataset(ByteTokenizer(), recipe)
        kinds = replace(recipe, corpus_mix=None, kinds=["prose"])
        legacy = build_dataset(ByteTokenizer(), kinds)
        assert legacy.prompt_mask is None and legacy.mix_report is None

        def no_tokenizing(*args, **kwargs):
            raise RuntimeError("tokenized again")

        monkeypatch.setattr(data, "_encode_all", no_tokenizing)
        assert torch.equal(build_dataset(ByteTokenizer(), recipe).chunks, first.chunks)
        loaded = build_dataset(ByteTokenizer(), kinds)
        assert torch.equal(loaded.chunks, legacy.chunks) and loaded.prompt_mask is None and loaded.mix_report is None
        (share / trained[0]).write_text("Copyright changed. " * 300)
        with pytest.raises(RuntimeError, match="tokenized again"):
            build_dataset(ByteTokenizer(), recipe)
    finally:
        monkeypatch.delenv(corpus.USR_SHARE_ENV)
        corpus.clear_caches()


def test_answer_loss_is_taken_on_the_targets_answers_only(tmp_path, monkeypatch):
    """chat_loss="answer": every batch the Trainer trains on carries a loss mask that is False exactly at
    the records' prompt tokens and separators, the loss is the cross-entropy over the answer tokens
    alone (by hand), labels of prompt tokens do not change it, and the option is saved with the draft."""
    import torch.nn.functional as F

    from hf_longspec.training.trainer import LongSpecTrainer

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    records = _answered_records(tmp_path / "records.jsonl")
    recipe = TrainRecipe(output_dir=str(tmp_path / "run"), max_steps=3, seq_len=48, batch_size=4, learning_rate=1e-3,
                         warmup_steps=0, max_tokens=4_000, save_steps=10**6, logging_steps=1, corpus_mix="chat=1",
                         chat_data=[str(records)], chat_windows="end", chat_loss="answer", corpus_max_epochs=4.0,
                         draft_overrides={"sliding_window": 16})
    seen = []
    original = LongSpecTrainer.compute_loss

    def recording(self, model, inputs, *args, **kwargs):
        seen.append({name: value.detach().clone() for name, value in inputs.items()})
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(LongSpecTrainer, "compute_loss", recording)
    draft = train_draft(target, ByteTokenizer(), recipe, progress=False)
    assert len(seen) == 3
    for batch in seen:
        ids = batch["input_ids"]
        assert torch.equal(batch["loss_mask"], (ids >= 100) & (ids < 200)), "the mask is not the answers"
    assert json.loads((tmp_path / "run" / "final" / "training_recipe.json").read_text())["chat_loss"] == "answer"

    monkeypatch.setattr(LongSpecTrainer, "compute_loss", original)
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path / "args"), use_cpu=True, report_to="none")
    trainer = LongSpecTrainer(model=draft, args=args, target=target, distill="argmax")
    batch = seen[0]
    keys, values, labels = trainer.target_signals(draft, batch["input_ids"], batch["position_ids"])
    loss = trainer.compute_loss(draft, batch)
    logits = draft(batch["input_ids"], keys, values, batch["position_ids"], noise_shift=int(batch["noise_shift"])).logits
    answer = batch["loss_mask"][:, 1:]
    by_hand = F.cross_entropy(logits[:, :-1][answer].float(), labels[:, 1:][answer])
    assert torch.allclose(loss, by_hand, rtol=1e-5, atol=0)
    everything = trainer.compute_loss(draft, {k: v for k, v in batch.items() if k != "loss_mask"})
    assert not torch.allclose(loss, everything, rtol=1e-3, atol=0)
    # other labels at the prompt tokens leave the loss as it was
    scrambled = labels.clone()
    scrambled[~batch["loss_mask"]] = (scrambled[~batch["loss_mask"]] + 7) % 257
    trainer.target_signals = lambda model, input_ids, position_ids: (keys, values, scrambled)
    assert torch.equal(trainer.compute_loss(draft, batch), loss)


def test_answer_loss_is_refused_where_it_cannot_mean_anything(tmp_path):
    records = str(_answered_records(tmp_path / "records.jsonl"))
    good = dict(output_dir=str(tmp_path / "run"), corpus_mix="code=0.5,chat=0.5", chat_data=[records],
                chat_windows="end", chat_loss="answer")
    TrainRecipe(**good).check()
    refusals = {
        "chat_loss='middle'; allowed: \\('all', 'answer'\\)": {"chat_loss": "middle"},
        "trains on no chat records": {"corpus_mix": "code=1"},
        "trains on no chat records.*chat_loss='all'": {"chat_data": []},
        "chat_windows='stream'.*Allowed: chat_windows='end'": {"chat_windows": "stream"},
        "distill='soft'.*Allowed: distill 'argmax' or 'none'": {"distill": "soft"},
        "seq_len=2.*Allowed: seq_len >= 3": {"seq_len": 2, "max_tokens": 100},
        "corpus_mix='chat=1,poems=1': unknown corpus sources": {"corpus_mix": "chat=1,poems=1"},
    }
    for message, change in refusals.items():
        with pytest.raises(TrainingRecipeError, match=message):
            TrainRecipe(**{**good, **change}).check()
    with pytest.raises(TrainingRecipeError, match="trains on no chat records"):
        TrainRecipe(output_dir=str(tmp_path / "run"), kinds=["code"], chat_loss="answer").check()


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


@pytest.mark.parametrize("noisy, rollout_steps, extra_layers", [(False, 1, ()), (True, 1, ()), (True, 3, ()),
                                                                 (True, 1, (0,))])
def test_resume_continues_from_the_checkpoint_like_an_uninterrupted_run(tmp_path, noisy, rollout_steps, extra_layers):
    """24 steps in one go == 12 steps, interrupted, then resumed to 24: the resumed run executes only
    steps 13..24 and ends on the same weights (a different fresh init proves they come from the
    checkpoint, optimizer and scheduler state included). Rollout draws nothing at random (argmax
    inputs), so it resumes exactly too. A draft that also reads another target layer, trained from an
    untrained one, resumes the same way: the long runs of such drafts span several machines."""
    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)

    def recipe(name):
        return TrainRecipe(
            output_dir=str(tmp_path / name), max_steps=24, seq_len=32, batch_size=4, learning_rate=1e-2,
            warmup_steps=0, max_tokens=20_000, save_steps=12, logging_steps=1, distill="argmax", noisy=noisy,
            kinds=["prose"], draft_overrides={"sliding_window": 16, "extra_target_layer_indices": list(extra_layers)},
            rollout_steps=rollout_steps,
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
    assert resumed.target_layers == whole.target_layers == (1, *extra_layers)
    log = json.loads((tmp_path / "interrupted" / "final" / "training_log.json").read_text())
    assert [entry["step"] for entry in log if "loss" in entry] == list(range(1, 25))
    mine, theirs = resumed.state_dict(), whole.state_dict()
    for name, value in theirs.items():
        assert torch.allclose(mine[name], value, rtol=1e-5, atol=1e-6), (name, (mine[name] - value).abs().max())


class _WeightsAtStart(TrainerCallback):
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.weights = {name: p.detach().clone() for name, p in model.named_parameters()}


def test_init_draft_continues_from_a_saved_draft_and_refuses_other_settings(tmp_path):
    """init_draft: the run starts from the saved draft's weights (not a fresh init) and trains on; a
    draft saved with another sliding window is refused by name before any training."""
    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)

    def recipe(name, **extra):
        return TrainRecipe(output_dir=str(tmp_path / name), max_steps=4, seq_len=32, batch_size=2, warmup_steps=0,
                           max_tokens=20_000, save_steps=10**6, logging_steps=1, kinds=["prose"],
                           draft_overrides={"sliding_window": 16}, **extra)

    torch.manual_seed(0)
    first = train_draft(target, ByteTokenizer(), recipe("first"), progress=False)
    saved = {name: p.detach().clone() for name, p in first.named_parameters()}
    start = _WeightsAtStart()
    torch.manual_seed(1)  # a fresh draft would differ from the saved one
    second = train_draft(target, ByteTokenizer(), recipe("second", init_draft=str(tmp_path / "first" / "final")),
                         progress=False, callbacks=[start])
    assert saved.keys() == start.weights.keys()
    for name, value in saved.items():
        assert torch.equal(start.weights[name], value), name
    assert max(_largest_relative_change(saved, second).values()) > 1e-3  # and it trained on from there
    recorded = json.loads((tmp_path / "second" / "final" / "training_recipe.json").read_text())
    assert recorded["init_draft"] == str(tmp_path / "first" / "final")

    clash = recipe("third", init_draft=str(tmp_path / "first" / "final"))
    clash.draft_overrides = {"sliding_window": 8}
    with pytest.raises(TrainingRecipeError, match=r"sliding_window=16 there, 8 asked"):
        train_draft(target, ByteTokenizer(), clash, progress=False)
    assert not (tmp_path / "third" / "final").exists()



def test_a_wider_mlp_grows_from_a_saved_draft_computing_the_same_and_trains_on(tmp_path):
    """draft_overrides intermediate_size wider than init_draft's MLP: the grown draft gives the saved
    draft's logits (the new units start silent), training moves the new units, the saved wider draft
    binds to the target and decodes losslessly; a narrower width is refused by name."""
    from hf_longspec.training.run import initial_draft

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    torch.manual_seed(0)
    LongSpecDraftModel.from_target(target, initializer_range=0.2).save_pretrained(tmp_path / "saved")
    saved = LongSpecDraftModel.from_pretrained(str(tmp_path / "saved"), dtype=torch.float32).bind(target)
    width = saved.config.intermediate_size

    def recipe(name, size):
        return TrainRecipe(output_dir=str(tmp_path / name), max_steps=4, seq_len=32, batch_size=2, warmup_steps=0,
                           max_tokens=20_000, save_steps=10**6, logging_steps=1, kinds=["prose"],
                           init_draft=str(tmp_path / "saved"), draft_overrides={"intermediate_size": size})

    grown = initial_draft(target, recipe("grown", 3 * width)).bind(target)
    assert grown.mlp.gate_proj.weight.shape == (3 * width, 32) and grown.mlp.down_proj.weight.shape == (32, 3 * width)
    assert grown.config.intermediate_size == 3 * width
    ids = torch.randint(0, 257, (2, 24))
    keys, values = torch.randn(2, 2, 24, 8), torch.randn(2, 2, 24, 8)
    with torch.no_grad():
        torch.testing.assert_close(grown(ids, keys, values, noise_shift=2).logits,
                                   saved(ids, keys, values, noise_shift=2).logits)

    trained = train_draft(target, ByteTokenizer(), recipe("wide", 3 * width), progress=False)
    assert trained.mlp.down_proj.weight[:, width:].abs().max() > 0  # the new units learned
    wide = LongSpecDraftModel.from_pretrained(str(tmp_path / "wide" / "final"), dtype=torch.float32).bind(target)
    assert wide.config.intermediate_size == 3 * width
    prompt = torch.randint(0, 257, (1, 40))
    vanilla = target.generate(prompt, max_new_tokens=16, do_sample=False)
    assert torch.equal(target.generate(prompt, assistant_model=wide, max_new_tokens=16, do_sample=False), vanilla)

    with pytest.raises(TrainingRecipeError, match=rf"intermediate_size={width // 2} is narrower than the draft's MLP"):
        train_draft(target, ByteTokenizer(), recipe("narrow", width // 2), progress=False)
    assert not (tmp_path / "narrow" / "final").exists()

def test_length_scaling_is_added_to_a_saved_draft_computing_the_same_and_learns(tmp_path):
    """draft_overrides cross_attention_length_scale on an init_draft without it: the same logits at
    first (gains zero), training moves the gains, the saved draft reloads with them and decodes
    equal to vanilla; another n0 than a draft's own is refused by name."""
    from hf_longspec.training.run import initial_draft
    from hf_longspec.training.widen import add_length_scaling

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    torch.manual_seed(0)
    LongSpecDraftModel.from_target(target, initializer_range=0.2).save_pretrained(tmp_path / "saved")
    saved = LongSpecDraftModel.from_pretrained(str(tmp_path / "saved"), dtype=torch.float32).bind(target)

    def recipe(name, scale):
        return TrainRecipe(output_dir=str(tmp_path / name), max_steps=6, seq_len=32, batch_size=2, warmup_steps=0,
                           learning_rate=1e-2, max_tokens=20_000, save_steps=10**6, logging_steps=1, kinds=["prose"],
                           init_draft=str(tmp_path / "saved"), draft_overrides={"cross_attention_length_scale": scale})

    grown = initial_draft(target, recipe("grown", 16)).bind(target)
    assert grown.config.cross_attention_length_scale == 16 and torch.all(grown.cross_attn.length_gain == 0)
    ids = torch.randint(0, 257, (2, 24))
    keys, values = torch.randn(2, 2, 24, 8), torch.randn(2, 2, 24, 8)
    with torch.no_grad():
        torch.testing.assert_close(grown(ids, keys, values, noise_shift=2).logits,
                                   saved(ids, keys, values, noise_shift=2).logits)

    train_draft(target, ByteTokenizer(), recipe("scaled", 16), progress=False)
    scaled = LongSpecDraftModel.from_pretrained(str(tmp_path / "scaled" / "final"), dtype=torch.float32).bind(target)
    assert scaled.config.cross_attention_length_scale == 16 and scaled.cross_attn.length_gain.abs().min() > 0
    prompt = torch.randint(0, 257, (1, 40))
    vanilla = target.generate(prompt, max_new_tokens=16, do_sample=False)
    assert torch.equal(target.generate(prompt, assistant_model=scaled, max_new_tokens=16, do_sample=False), vanilla)

    with pytest.raises(TrainingRecipeError, match="cross_attention_length_scale=32 asked of a draft trained with 16"):
        add_length_scaling(scaled, 32)
    with pytest.raises(TrainingRecipeError, match="cross_attention_length_scale must be None"):
        add_length_scaling(saved, -1)
    assert saved.config.cross_attention_length_scale is None and saved.cross_attn.length_gain is None


def test_entry_input_is_added_to_a_saved_draft_computing_the_same_and_learns(tmp_path):
    """draft_overrides target_entry_input=True on an init_draft without it: the same logits at first
    (the projection zero), training moves the projection, the saved draft reloads with it and decodes
    equal to vanilla; asking a draft that reads the entry not to is refused by name."""
    from hf_longspec.training.run import initial_draft

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    torch.manual_seed(0)
    LongSpecDraftModel.from_target(target, initializer_range=0.2).save_pretrained(tmp_path / "saved")
    saved = LongSpecDraftModel.from_pretrained(str(tmp_path / "saved"), dtype=torch.float32).bind(target)

    def recipe(name, init, entry):
        return TrainRecipe(output_dir=str(tmp_path / name), max_steps=6, seq_len=32, batch_size=2, warmup_steps=0,
                           learning_rate=1e-2, max_tokens=20_000, save_steps=10**6, logging_steps=1, kinds=["prose"],
                           init_draft=str(init), draft_overrides={"target_entry_input": entry})

    grown = initial_draft(target, recipe("grown", tmp_path / "saved", True)).bind(target)
    assert grown.config.target_entry_input and torch.all(grown.cross_attn.entry_proj.weight == 0)
    ids = torch.randint(0, 257, (2, 24))
    keys, values = torch.randn(2, 2, 24, 8), torch.randn(2, 2, 24, 8)
    with torch.no_grad():
        torch.testing.assert_close(grown(ids, keys, values, noise_shift=2).logits,
                                   saved(ids, keys, values, noise_shift=2).logits)

    train_draft(target, ByteTokenizer(), recipe("reading", tmp_path / "saved", True), progress=False)
    final = tmp_path / "reading" / "final"
    reading = LongSpecDraftModel.from_pretrained(str(final), dtype=torch.float32).bind(target)
    assert reading.config.target_entry_input and reading.cross_attn.entry_proj.weight.abs().sum() > 0
    prompt = torch.randint(0, 257, (1, 40))
    vanilla = target.generate(prompt, max_new_tokens=16, do_sample=False)
    assert torch.equal(target.generate(prompt, assistant_model=reading, max_new_tokens=16, do_sample=False), vanilla)
    with pytest.raises(TrainingRecipeError, match="target_entry_input=True there, False asked"):
        initial_draft(target, recipe("off", final, False))


def test_a_trained_draft_decodes_with_the_shipped_chain_unless_asked_otherwise(tmp_path):
    """A new draft from `hf-longspec train` sets lookup_tokens 32 in its config, re-ranked leaves, and the CPU round
    1-1-1 + 16 with plain steps and its leaf not re-ranked, as the shipped draft does (with 0, the class default, generate verifies the tree alone: less than half the
    shipped decoder's tau);
    --lookup-tokens sets another, on a new draft or a continued one, whose own is kept otherwise."""
    from hf_longspec.cli import build_parser, draft_overrides
    from hf_longspec.training.run import initial_draft, new_draft

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024)
    parse = build_parser().parse_args
    made = new_draft(target, TrainRecipe(output_dir="")).config
    assert (made.lookup_tokens, made.cpu_tree_widths, made.cpu_lookup_tokens, made.cpu_plain_steps) == \
        (32, [1, 1, 1], 16, True)  # the shipped's
    assert (made.tree_rerank_leaves, made.cpu_tree_rerank_leaves) == (True, False)  # and its leaves (44th session)
    asked_none = draft_overrides(parse(["train", "--output", "x", "--lookup-tokens", "0"]))
    assert asked_none == {"lookup_tokens": 0}
    assert new_draft(target, TrainRecipe(output_dir="", draft_overrides=asked_none)).config.lookup_tokens == 0
    LongSpecDraftModel.from_target(target).save_pretrained(tmp_path / "saved")  # the class default: no chain
    assert initial_draft(target, TrainRecipe(output_dir="", init_draft=str(tmp_path / "saved"))).config.lookup_tokens == 0
    continued = initial_draft(target, TrainRecipe(output_dir="", init_draft=str(tmp_path / "saved"),
                                                  draft_overrides={"lookup_tokens": 16}))
    continued.save_pretrained(tmp_path / "continued")
    assert LongSpecDraftModel.from_pretrained(tmp_path / "continued").config.lookup_tokens == 16


def test_a_continued_draft_takes_the_cross_attention_window_asked(tmp_path):
    """draft_overrides cross_attention_window on an init_draft (thirty-fifth session: fine-tuning the shipped draft
    to read at 8k the window it will read there): the window is what the draft reads, not a weight, so a
    continued draft takes it, and training and its saved config then read that window; a bad one is refused."""
    from hf_longspec.training.run import initial_draft

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024)
    LongSpecDraftModel.from_target(target).save_pretrained(tmp_path / "saved")  # reads every entry
    continued = initial_draft(target, TrainRecipe(output_dir="", init_draft=str(tmp_path / "saved"),
                                                  draft_overrides={"cross_attention_window": 64}))
    assert continued.config.cross_attention_window == 64
    continued.save_pretrained(tmp_path / "continued")
    assert LongSpecDraftModel.from_pretrained(tmp_path / "continued").config.cross_attention_window == 64
    with pytest.raises(TrainingRecipeError, match="cross_attention_window"):
        TrainRecipe(output_dir="", init_draft=str(tmp_path / "saved"),
                    draft_overrides={"cross_attention_window": 0}).check()  # before any model loads


def test_a_continued_draft_keeps_the_target_layer_it_reads(tmp_path):
    """draft_overrides target_layer_index on an init_draft: -1 and the last layer's number name the same
    layer and are taken; another layer (the cross-attention learned that layer's keys) or one outside the
    target is refused by name. A new draft reads the layer asked for."""
    from hf_longspec.training.run import initial_draft, new_draft

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=3, max_positions=1024, initializer_range=0.2)
    LongSpecDraftModel.from_target(target).save_pretrained(tmp_path / "saved")

    def recipe(layer):
        return TrainRecipe(output_dir=str(tmp_path / "run"), init_draft=str(tmp_path / "saved"),
                           draft_overrides={"target_layer_index": layer})

    for same in (-1, 2):
        assert initial_draft(target, recipe(same)).bind(target).target_layer_index == 2
    for other in (1, -2, 5):
        with pytest.raises(TrainingRecipeError, match=f"target_layer_index=-1 there, {other} asked"):
            initial_draft(target, recipe(other))
    assert new_draft(target, TrainRecipe(output_dir="", draft_overrides={"target_layer_index": 1})).target_layer_index == 1
    # the extra layers a draft reads are its own too: a continued draft keeps them, another set is refused
    LongSpecDraftModel.from_target(target, extra_target_layer_indices=[0]).save_pretrained(tmp_path / "reads_two")

    def extra(layers):
        return TrainRecipe(output_dir="", init_draft=str(tmp_path / "reads_two"),
                           draft_overrides={"extra_target_layer_indices": layers})

    assert initial_draft(target, extra([0])).bind(target).target_layers == (2, 0)
    assert initial_draft(target, extra([-3])).bind(target).target_layers == (2, 0)  # layer 0 of 3, named from the end
    with pytest.raises(TrainingRecipeError, match=r"extra_target_layer_indices=\[1\] asked of a draft trained with \[0\]"):
        initial_draft(target, extra([1]))


def test_extra_target_layers_grow_a_trained_draft_computing_the_same_and_train_on(tmp_path):
    """draft_overrides extra_target_layer_indices on an init_draft that reads one layer: the new query blocks
    start with zero o_proj columns (the same logits as the saved draft), and training moves them."""
    from hf_longspec.target_support import target_layers_kv
    from hf_longspec.training.run import initial_draft

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=3, max_positions=1024, initializer_range=0.2)
    saved = LongSpecDraftModel.from_target(target, sliding_window=16, cross_attention_length_scale=8)
    with torch.no_grad():
        for p in saved.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    saved.save_pretrained(tmp_path / "init")
    recipe = TrainRecipe(output_dir=str(tmp_path / "run"), init_draft=str(tmp_path / "init"), max_steps=6, seq_len=32,
                         batch_size=2, learning_rate=1e-2, warmup_steps=0, max_tokens=20_000, save_steps=100,
                         logging_steps=1, kinds=["prose"], draft_overrides={"extra_target_layer_indices": [0, 1]})
    grown = initial_draft(target, recipe).bind(target)
    assert grown.target_layers == (2, 0, 1) and grown.cross_attn.length_gain.shape == (12,)
    ids = torch.randint(0, 257, (1, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        cache = target(ids, use_cache=True).past_key_values
        one, three = target_layers_kv(cache, (2,)), target_layers_kv(cache, (2, 0, 1))
        torch.testing.assert_close(grown(ids, *three, noise_shift=2).logits, saved(ids, *one, noise_shift=2).logits)
    trained = train_draft(target, ByteTokenizer(), recipe, progress=False)
    added = trained.cross_attn.o_proj.weight[:, 4 * 8:]  # the new blocks' columns (4 heads of 8 per layer)
    assert added.abs().amax() > 1e-3
    LongSpecDraftModel.from_target(target, target_entry_input=True).save_pretrained(tmp_path / "entry")
    with pytest.raises(TrainingRecipeError, match="cannot be combined with target_entry_input"):
        initial_draft(target, TrainRecipe(output_dir="", init_draft=str(tmp_path / "entry"),
                                          draft_overrides={"extra_target_layer_indices": [0]}))
    assert initial_draft(target, TrainRecipe(output_dir="", init_draft=str(tmp_path / "entry"),
                                             draft_overrides={"extra_target_layer_indices": ()})).target_layers == (2,)
    with pytest.raises(TrainingRecipeError, match="extra_target_layer_indices=4; allowed: a list of distinct ints"):
        initial_draft(target, TrainRecipe(output_dir="", init_draft=str(tmp_path / "init"),
                                          draft_overrides={"extra_target_layer_indices": 4}))


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


# ------------------------------------------------------------------------------ multi-step rollout
@pytest.fixture
def one_thread():
    """Tiny tensors gain nothing from intra-op threads, and on shared cores two threads waiting for
    each other made the rollout run below 70x slower (73 s against 1 s)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _rollout_case(dtype=torch.float32, entry_input=False):
    """A tiny target, a draft perturbed off its init (so its argmax chains are not trivial), one
    fixed batch: ids, anchor-offset positions (a jump after 4 anchors), random target K/V, labels.
    entry_input: the draft also reads the newest target entry directly (target_entry_input)."""
    target = tiny_llama(initializer_range=0.3).to(dtype)
    draft = LongSpecDraftModel.from_target(target, sliding_window=5, target_entry_input=entry_input).to(dtype)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(torch.randn(p.shape, generator=generator, dtype=dtype) * 0.2)
    ids = torch.randint(0, 96, (2, 14), generator=generator)
    positions = torch.cat([torch.arange(4), torch.arange(30, 40)])[None].expand(2, -1)
    keys = torch.randn(2, 2, 14, 16, generator=generator, dtype=dtype)
    values = torch.randn(2, 2, 14, 16, generator=generator, dtype=dtype)
    labels = torch.randint(0, 96, (2, 14), generator=generator)
    labels[:, 0] = -100
    return target, draft, ids, positions, keys, values, labels


def test_rollout_one_step_is_todays_loss_bit_for_bit(tmp_path, one_thread):
    """rollout_steps=1 (the default) through LongSpecTrainer.compute_loss gives exactly the loss of
    the teacher-forced forward as it was written before rollout existed (spelled out here)."""
    import torch.nn.functional as F
    from transformers import TrainingArguments

    from hf_longspec.training.trainer import LongSpecTrainer

    target, draft, ids, positions, keys, values, labels = _rollout_case()
    hidden = draft._embed(ids)
    cos, sin = draft.rotary_emb(positions, hidden.dtype)
    hidden = hidden + draft.self_attn.forward_sequence(draft.input_layernorm(hidden), cos, sin, positions)
    hidden = hidden + draft.cross_attn.forward_sequence(draft.cross_attn_layernorm(hidden), cos, sin, keys, values, 3)
    hidden = hidden + draft.mlp(draft.post_attention_layernorm(hidden))
    logits = draft._logits(hidden)
    today = F.cross_entropy(logits[:, :-1].reshape(-1, 96).float(), labels[:, 1:].reshape(-1), ignore_index=-100)

    args = TrainingArguments(output_dir=str(tmp_path), use_cpu=True, report_to="none")
    trainer = LongSpecTrainer(model=draft, args=args, target=target, distill="none")
    assert trainer.rollout_steps == 1 and TrainRecipe(output_dir="x").rollout_steps == 1
    trainer.target_signals = lambda model, input_ids, position_ids: (keys, values, labels)
    loss = trainer.compute_loss(draft, {"input_ids": ids, "position_ids": positions, "noise_shift": torch.tensor(3)})
    assert torch.equal(loss, today)
    # the rollout's first step is the same teacher-forced forward
    rolled = draft(ids, keys, values, positions, noise_shift=3, labels=labels, rollout_steps=3)
    assert torch.allclose(rolled.step_losses[0], today, rtol=1e-6, atol=0)


def _greedy_chain_logits(draft, ids, positions, keys, values, shift, step, i):
    """What the draft predicts at position i at rollout step `step`, from first principles: draft the
    greedy chain from its real root r = i - step + 1 (position 0 at the least) one token at a time,
    each call a plain teacher-forced forward over [real tokens .. r, chain so far] whose last
    position may read target K/V only up to r - shift (the root's lag), then run position i."""
    root = max(0, i - step + 1)
    lag = shift + step - 1  # shift of the last call: its position i is step - 1 past the root's chain start
    tokens = ids[:, : root + 1]
    for position in range(root, i):  # the token at position + 1 is drafted at position
        call_lag = lag - (i - position)  # the same committed K/V: i - lag == position - call_lag
        out = draft(tokens, keys[:, :, : position + 1], values[:, :, : position + 1], positions[:, : position + 1],
                    noise_shift=call_lag).logits[:, -1]
        tokens = torch.cat([tokens, out.argmax(dim=-1, keepdim=True)], dim=1)
    return draft(tokens, keys[:, :, : i + 1], values[:, :, : i + 1], positions[:, : i + 1], noise_shift=lag).logits[:, -1]


@pytest.mark.parametrize("shift,entry_input", [(1, False), (2, False), (2, True)])
def test_rollout_steps_equal_greedy_chains_drafted_one_token_at_a_time(shift, entry_input, one_thread):
    """rollout_steps=3 on one batch (float64): step k's logits at every position equal those of the
    greedy chain of depth k drafted token by token with plain forwards (inputs = the draft's own
    argmax, self-attention over real tokens up to the root plus the chain, cross-attention lag
    shift + k - 1, and so the newest entry read directly, too, is the root's), and the loss is
    (L1 + 0.8 L2 + 0.64 L3) / 2.44 of those steps."""
    import torch.nn.functional as F

    _, draft, ids, positions, keys, values, labels = _rollout_case(torch.float64, entry_input)
    with torch.no_grad():
        out = draft(ids, keys, values, positions, noise_shift=shift, labels=labels, rollout_steps=3)
        assert len(out.step_logits) == 3
        references = []
        for step in (1, 2, 3):
            reference = torch.stack([_greedy_chain_logits(draft, ids, positions, keys, values, shift, step, i)
                                     for i in range(ids.shape[1])], dim=1)
            torch.testing.assert_close(out.step_logits[step - 1], reference, rtol=1e-9, atol=1e-9)
            references.append(reference)
        # the steps differ: later steps read drafted tokens and see less of the target
        assert (out.step_logits[1] - out.step_logits[0]).abs().max() > 1e-3
        step_inputs = [torch.cat([ids[:, :1], logits[:, :-1].argmax(-1)], dim=1) for logits in references[:2]]
        assert all((inputs != ids).any() for inputs in step_inputs)
        losses = [F.cross_entropy(r[:, :-1].reshape(-1, 96).float(), labels[:, 1:].reshape(-1), ignore_index=-100)
                  for r in references]  # the loss is taken in float32, as in training
        expected = (losses[0] + 0.8 * losses[1] + 0.64 * losses[2]) / (1 + 0.8 + 0.64)
        torch.testing.assert_close(out.loss, expected, rtol=1e-6, atol=0)
        torch.testing.assert_close(out.step_losses, torch.stack(losses), rtol=1e-6, atol=0)


def test_rollout_gradients_flow_through_every_step_but_not_through_inputs(one_thread):
    """Each step's loss trains the draft through that step's own forward; the fed-back tokens are
    integers (argmax), so nothing flows between steps through them."""
    _, draft, ids, positions, keys, values, labels = _rollout_case()
    out = draft(ids, keys, values, positions, noise_shift=1, labels=labels, rollout_steps=3)
    grads = torch.autograd.grad(out.step_logits[2].sum(), [draft.mlp.down_proj.weight, draft.self_attn.k_proj.weight])
    assert all(g.abs().sum() > 0 for g in grads)
    assert not out.step_losses.requires_grad


def test_rollout_training_run_learns_and_records_the_option(tmp_path, one_thread):
    """A short CPU run with --rollout-steps 3: the loss of every step falls, the recipe records the
    option, and bad values are refused before anything loads."""
    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    recipe = TrainRecipe(
        output_dir=str(tmp_path / "run"), max_steps=40, seq_len=32, batch_size=4, learning_rate=1e-2,
        warmup_steps=0, max_tokens=20_000, save_steps=10**6, logging_steps=1, distill="argmax",
        kinds=["prose"], draft_overrides={"sliding_window": 16}, rollout_steps=3,
    )
    train_draft(target, ByteTokenizer(), recipe, progress=False)
    final = tmp_path / "run" / "final"
    assert json.loads((final / "training_recipe.json").read_text())["rollout_steps"] == 3
    log = [entry for entry in json.loads((final / "training_log.json").read_text()) if "loss" in entry]
    assert len(log) == 40
    for key in ("loss", "loss_step_1", "loss_step_2", "loss_step_3"):
        values = [entry[key] for entry in log]
        assert sum(values[-5:]) / 5 < sum(values[:5]) / 5 - 0.5, (key, values)
    for entry in log:  # the logged loss is the decay-weighted mean of the logged steps
        mean = (entry["loss_step_1"] + 0.8 * entry["loss_step_2"] + 0.64 * entry["loss_step_3"]) / 2.44
        assert abs(entry["loss"] - mean) < 1e-3 * entry["loss"]
    for bad in ({"rollout_steps": 0}, {"rollout_steps": 32}, {"rollout_decay": 0}, {"rollout_steps": 2.0}):
        with pytest.raises(TrainingRecipeError, match="rollout"):
            TrainRecipe(output_dir=str(tmp_path / "new"), seq_len=32, max_tokens=1000, **bad).check()


def _ablation_script(embedded=None, monkeypatch=None):
    """The script; with `embedded`, its target load returns the session's SmolLM2 (a load takes ~40 s)."""
    script = load_script("benchmarks/ablate_training.py")
    if embedded is not None:
        monkeypatch.setattr(script, "load_embedded_target", lambda **kwargs: embedded)
    return script


def test_training_ablation_runs_every_variant_per_seed_and_pairs_them(embedded, tmp_path, monkeypatch, capsys):
    """benchmarks/ablate_training.py --quick on the embedded target: each variant trained once per
    seed from the shipped draft, its override in the recipe, the seeds training differently, and the
    summary's paired difference computed prompt by prompt against the first variant's same seed."""
    from safetensors.torch import load_file

    script = _ablation_script(embedded, monkeypatch)
    measure_tau, chains = script.measure_tau, []

    def measure_and_record(*args, **kwargs):
        chains.append(kwargs.get("longspec_lookup_tokens"))
        return measure_tau(*args, **kwargs)

    monkeypatch.setattr(script, "measure_tau", measure_and_record)
    assert script.main(["--out", str(tmp_path), "--quick", "--seeds", "0", "1", "--eval-start", "--lookup-tokens", "0",
                        "--variant", "base", "--variant", "rollout2=rollout_steps:2,rollout_decay:0.5"]) == 0
    report = json.loads((tmp_path / "ablation.json").read_text())
    runs = report["runs"]
    # the starting draft measured on the same prompts, the tree alone (the shipped config has a chain)
    assert report["start"]["draft"] == "embedded" and len(report["start"]["tau_per_prompt"]) == len(report["prompts"])
    # each prompt named by its token ids, so that a later merge can tell the same prompts from others
    from hf_longspec.evaluation import prompt_digest

    (kind, length, ids), = script.eval_prompts(embedded[1], [200], ["code"], 1, "cpu")  # --quick's one prompt
    assert report["prompts"] == [{"kind": kind, "length": length, "digest": prompt_digest(ids)}]
    assert {run["lookup_tokens"] for run in runs} == {0} and chains == [0] * 5  # the start, then 4 runs
    assert [row["variant"] for row in report["against_start"]] == ["base", "rollout2"]
    # seed-major, so that a run cut short keeps whole pairs
    assert [(run["variant"], run["seed"]) for run in runs] == [("base", 0), ("rollout2", 0), ("base", 1), ("rollout2", 1)]
    assert [run["recipe"]["rollout_steps"] for run in runs] == [1, 2, 1, 2]
    assert {run["recipe"]["init_draft"] for run in runs} == {"embedded"}
    weights = [load_file(tmp_path / "runs" / f"base-seed{seed}" / "final" / "model.safetensors") for seed in (0, 1)]
    assert any(not torch.equal(weights[0][name], weights[1][name]) for name in weights[0])  # the seed matters
    # each tau names the weights it measured: the shipped draft's at the start, each run's saved draft after
    from hf_longspec.embedded import embedded_draft_dir
    from hf_longspec.publishing.weights_digest import folder_weights_digest

    assert report["start"]["weights_digest"] == folder_weights_digest(embedded_draft_dir())
    assert [run["weights_digest"] for run in runs] == [
        folder_weights_digest(tmp_path / "runs" / f"{run['variant']}-seed{run['seed']}" / "final") for run in runs]
    base, rollout = report["summary"]
    assert base["paired_delta_mean"] == 0.0 and base["tau_min"] <= base["tau_mean"] <= base["tau_max"]
    deltas = [a - b for seed in (0, 1) for a, b in zip(runs[2 * seed + 1]["tau_per_prompt"], runs[2 * seed]["tau_per_prompt"])]
    assert rollout["paired_delta_mean"] == pytest.approx(sum(deltas) / len(deltas))
    assert "| rollout2 | 2 |" in capsys.readouterr().out


def test_an_ablation_cut_short_keeps_the_whole_pairs_it_measured(embedded, tmp_path, monkeypatch):
    """A time limit that kills ablate_training.py mid-way leaves ablation.json with every run so far:
    seed 0's variants together, before seed 1's (here the third tau measurement fails)."""
    script = _ablation_script(embedded, monkeypatch)
    measured = script.measure_tau
    calls = []

    def measure_then_fail(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("killed by the call's time limit")
        return measured(*args, **kwargs)

    monkeypatch.setattr(script, "measure_tau", measure_then_fail)
    with pytest.raises(RuntimeError, match="time limit"):
        script.main(["--out", str(tmp_path), "--quick", "--seeds", "0", "1",
                     "--variant", "base", "--variant", "rollout2=rollout_steps:2"])
    report = json.loads((tmp_path / "ablation.json").read_text())
    assert [(run["variant"], run["seed"]) for run in report["runs"]] == [("base", 0), ("rollout2", 0)]
    assert [row["variant"] for row in report["summary"]] == ["base", "rollout2"]


def test_ablation_against_the_start_pairs_every_run_with_the_starting_draft():
    """--eval-start: each variant's runs (all seeds) against the starting draft, prompt by prompt; and
    asking it of an untrained start is refused by name."""
    script = _ablation_script()
    runs = [{"variant": "base", "seed": 0, "tau_per_prompt": [2.0, 3.0]},
            {"variant": "base", "seed": 1, "tau_per_prompt": [2.5, 2.0]},
            {"variant": "long", "seed": 0, "tau_per_prompt": [3.0, 3.5]}]
    base, long = script.against_start(runs, {"tau_per_prompt": [2.0, 3.0]})  # prompt by prompt
    # the standard error is over prompts, each prompt's difference averaged over the seeds first: base's are
    # +0.25 and -0.5
    assert base == {"variant": "base", "paired_delta_mean": pytest.approx((0.0 + 0.0 + 0.5 - 1.0) / 4),
                    "paired_delta_stderr": pytest.approx(0.375), "prompts_better": 1, "prompts_worse": 1}
    assert long["paired_delta_mean"] == pytest.approx(0.75) and (long["prompts_better"], long["prompts_worse"]) == (2, 0)
    assert long["paired_delta_stderr"] == pytest.approx(0.25)
    with pytest.raises(SystemExit):
        script.parse_args(["--out", "x", "--init-draft", "untrained", "--eval-start"])


def test_ablation_eval_only_measures_the_given_draft_and_trains_nothing(embedded, tmp_path, monkeypatch):
    """--eval-only: the draft named by --init-draft measured on the ablation's prompts (so a draft trained
    elsewhere pairs prompt by prompt with the ablations), no run trained; a --variant with it is refused."""
    script = _ablation_script(embedded, monkeypatch)
    monkeypatch.setattr(script, "train_draft", lambda *args, **kwargs: pytest.fail("--eval-only trained a draft"))
    assert script.main(["--out", str(tmp_path), "--quick", "--eval-only", "--lookup-tokens", "0"]) == 0
    report = json.loads((tmp_path / "ablation.json").read_text())
    assert report["runs"] == [] and not (tmp_path / "runs").exists()
    assert report["start"]["draft"] == "embedded" and len(report["start"]["tau_per_prompt"]) == len(report["prompts"]) == 1
    assert report["start"]["tau"] >= 1.0 and report["settings"]["variants"] == {}
    for refused in (["--variant", "base"], ["--merge", "a.json", "b.json"]):
        with pytest.raises(SystemExit):
            script.parse_args(["--out", "x", "--eval-only", *refused])
    with pytest.raises(SystemExit):
        script.parse_args(["--out", "x", "--eval-only", "--init-draft", "untrained"])


def test_long_run_report_pairs_the_long_draft_with_the_shipped_one_prompt_by_prompt(tmp_path):
    """benchmarks/long_run_report.py: the two --eval-only files paired prompt by prompt (pooled and per
    cell), every call's steps from its summary and the last call's from the Trainer state; eval files
    of other prompts are refused by name."""
    script = load_script("benchmarks/long_run_report.py")
    settings = {"eval_kinds": ["code", "chat"], "eval_lengths": [2048], "eval_prompts": 2, "new_tokens": 96,
                "lookup_tokens": 0}
    prompts = [{"kind": "code", "length": 2048}] * 2 + [{"kind": "chat", "length": 2048}] * 2

    def eval_file(name, taus):
        cells = {"code": {"2048": sum(taus[:2]) / 2}, "chat": {"2048": sum(taus[2:]) / 2}}
        report = {"settings": settings, "prompts": prompts, "runs": [],
                  "start": {"draft": name, "tau": sum(taus) / 4, "tau_per_prompt": taus, "tau_per_cell": cells}}
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(report))
        return path

    state = tmp_path / "trainer_state.json"
    state.write_text(json.dumps({"global_step": 30, "max_steps": 30, "epoch": 1.5, "log_history": [
        {"step": 10, "loss": 3.0}, {"step": 20, "loss": 2.5}, {"step": 30, "loss": 2.0}]}))
    summary = tmp_path / "call1.json"
    summary.write_text(json.dumps({"speed": {"global_step": 12, "steps": 12, "all_steps_seconds": 6.0,
                                             "seconds_per_step": 0.5, "tokens_per_second": 100.0,
                                             "peak_gpu_memory_gib_per_rank": [1.0, 2.0]}}))
    shipped, long = eval_file("shipped", [4.0, 3.0, 3.0, 2.0]), eval_file("long", [4.5, 3.0, 2.0, 2.0])
    out = tmp_path / "out"
    assert script.main(["--trainer-state", str(state), "--calls", str(summary), "--eval-long", str(long),
                        "--eval-shipped", str(shipped), "--out", str(out), "--figure", str(tmp_path / "f.png")]) == 0
    report = json.loads((out / "long_run.json").read_text())
    assert report["loss"] == [[10, 3.0], [20, 2.5], [30, 2.0]]
    assert [(row["from_step"], row["to_step"], row["steps"]) for row in report["calls"]] == [(0, 12, 12), (12, 30, 18)]
    assert report["calls"][0]["peak_gpu_memory_gib"] == 2.0 and report["calls"][1]["summary"] == "not returned"
    pooled = report["comparison"]["against_start"][0]
    assert pooled["paired_delta_mean"] == pytest.approx((0.5 + 0 - 1.0 + 0) / 4)
    assert (pooled["prompts_better"], pooled["prompts_worse"]) == (1, 1)
    cells = {(row["kind"], row["length"]): row["delta_mean"] for row in report["comparison"]["cells"]}
    assert cells == {("code", 2048): pytest.approx(0.25), ("chat", 2048): pytest.approx(-0.5)}
    if importlib.util.find_spec("matplotlib") is not None:  # the [bench] extra draws the figure
        assert (tmp_path / "f.png").stat().st_size > 0
    other = json.loads(long.read_text())
    named = [{**prompt, "digest": str(index)} for index, prompt in enumerate(prompts)]
    shipped.write_text(json.dumps({**json.loads(shipped.read_text()), "prompts": named}))
    renamed = [{**prompt, "digest": "x"} if index == 3 else prompt for index, prompt in enumerate(named)]
    for key, value in (("settings", {**settings, "new_tokens": 64}), ("prompts", prompts[::-1]), ("prompts", renamed)):
        long.write_text(json.dumps({**other, key: value}))
        with pytest.raises(SystemExit, match="new_tokens" if key == "settings" else "different prompts"):
            script.main(["--trainer-state", str(state), "--eval-long", str(long), "--eval-shipped", str(shipped),
                         "--out", str(out)])


def test_long_run_report_reads_a_draft_folder_and_pairs_a_baseline_run(tmp_path):
    """long_run_report.py --draft-folder: a run whose checkpoint stayed on the machine reports from the
    returned draft folder (its training_log.json is the Trainer log); --baseline-eval pairs this run's draft
    against another run's prompt by prompt and --baseline-report draws that run's loss; giving both
    or neither of --trainer-state / --draft-folder, or a report without its eval, is refused by name."""
    script = load_script("benchmarks/long_run_report.py")
    settings = {"eval_kinds": ["code"], "eval_lengths": [2048], "eval_prompts": 2, "new_tokens": 96,
                "lookup_tokens": 0}
    prompts = [{"kind": "code", "length": 2048}] * 2

    def eval_file(name, taus):
        report = {"settings": settings, "prompts": prompts, "runs": [],
                  "start": {"draft": name, "tau": sum(taus) / 2, "tau_per_prompt": taus,
                            "tau_per_cell": {"code": {"2048": sum(taus) / 2}}}}
        (tmp_path / f"{name}.json").write_text(json.dumps(report))
        return str(tmp_path / f"{name}.json")

    folder = tmp_path / "final_bf16"
    folder.mkdir()
    (folder / "training_log.json").write_text(json.dumps([
        {"step": 10, "loss": 3.0, "epoch": 0.5}, {"step": 20, "loss": 2.0, "epoch": 1.0},
        {"step": 20, "train_runtime": 9.0, "epoch": 1.0}]))
    (folder / "training_speed.json").write_text(json.dumps({"global_step": 20}))
    (folder / "training_recipe.json").write_text(json.dumps({"max_steps": 20}))
    plain = tmp_path / "plain_long_run.json"
    plain.write_text(json.dumps({"loss": [[10, 3.5], [20, 2.5]]}))
    shipped, wide, base = eval_file("shipped", [3.0, 3.0]), eval_file("wide", [3.5, 2.0]), eval_file("plain", [3.0, 3.0])
    out = tmp_path / "out"
    common = ["--eval-long", wide, "--eval-shipped", shipped, "--out", str(out), "--figure", str(tmp_path / "f.png")]
    assert script.main(["--draft-folder", str(folder), "--name", "wide", "--baseline-name", "plain",
                        "--baseline-eval", base, "--baseline-report", str(plain), *common]) == 0
    report = json.loads((out / "long_run.json").read_text())
    assert (report["name"], report["global_step"], report["max_steps"], report["epoch"]) == ("wide", 20, 20, 1.0)
    assert report["loss"] == [[10, 3.0], [20, 2.0]]
    row = report["baseline"]["against_start"][0]
    assert report["baseline"]["name"] == "plain" and report["baseline"]["loss"] == [[10, 3.5], [20, 2.5]]
    assert row["paired_delta_mean"] == pytest.approx((0.5 - 1.0) / 2) and (row["prompts_better"], row["prompts_worse"]) == (1, 1)
    if importlib.util.find_spec("matplotlib") is not None:
        assert (tmp_path / "f.png").stat().st_size > 0
    refused = ((["--trainer-state", "x", "--draft-folder", str(folder)], "give one of"), ([], "give one of"),
               (["--draft-folder", str(tmp_path)], "lacks training_log.json"),
               (["--draft-folder", str(folder), "--baseline-report", str(plain)], "give both"))
    for extra, match in refused:
        with pytest.raises(SystemExit, match=match):
            script.main([*extra, *common])


def test_ablation_variants_name_real_recipe_fields():
    script = _ablation_script()
    assert script.parse_variant("base") == ("base", {})
    assert script.parse_variant("long=seq_len:4096,distill:argmax,noisy:false") == (
        "long", {"seq_len": 4096, "distill": "argmax", "noisy": False})
    with pytest.raises(ValueError, match="is not field:value over a TrainRecipe field; allowed fields: .*seq_len"):
        script.parse_variant("typo=seq_length:4096")
    with pytest.raises(ValueError, match="a variant needs a name"):
        script.parse_variant("=seq_len:4096")
    # JSON values keep their commas: a whole corpus mix, a list of files
    assert script.parse_variant('ans=corpus_mix:{"chat":0.5,"code":0.5},chat_data:["a.jsonl","b,c.jsonl"],'
                                'chat_loss:answer') == (
        "ans", {"corpus_mix": {"chat": 0.5, "code": 0.5}, "chat_data": ["a.jsonl", "b,c.jsonl"], "chat_loss": "answer"})


def test_ablation_summary_pairs_each_run_with_the_first_variants_same_seed():
    """Paired differences are prompt by prompt against the first variant's run of the SAME seed."""
    script = _ablation_script()
    runs = [{"variant": "base", "seed": 0, "tau": 2.0, "tau_per_prompt": [2.0, 2.0]},
            {"variant": "base", "seed": 1, "tau": 3.0, "tau_per_prompt": [3.0, 3.0]},
            {"variant": "new", "seed": 0, "tau": 2.5, "tau_per_prompt": [2.5, 2.0]},
            {"variant": "new", "seed": 1, "tau": 2.9, "tau_per_prompt": [3.4, 2.4]}]
    base, new = script.summarize(runs)
    assert base["paired_delta_mean"] == 0.0 and (base["tau_min"], base["tau_max"]) == (2.0, 3.0)
    assert new["paired_delta_mean"] == pytest.approx((0.5 + 0.0 + 0.4 - 0.6) / 4)
    assert (new["prompts_better"], new["prompts_worse"]) == (2, 1) and new["tau_mean"] == pytest.approx(2.7)
    assert "| new | 2 | 2.700 | 2.50-2.90 | +0.075 | 2 / 1 |" in script.table([base, new])


def _ablation_call(script, tmp_path, name, seed, taus, prompts=None, **settings):
    """The ablation.json that one call of ablate_training.py writes: variants base and new, one seed,
    `taus` per variant the tau of each of the two prompts (code at 2048 and at 8000 tokens)."""
    args = script.parse_args(["--out", str(tmp_path / name), "--seeds", str(seed),
                              "--variant", "base", "--variant", "new=rollout_steps:2"])
    report = {"machine": {"name": name},
              "settings": {**vars(args), "variants": {"base": {}, "new": {"rollout_steps": 2}}, **settings},
              "prompts": prompts or [{"kind": "code", "length": 2048}, {"kind": "code", "length": 8000}],
              "runs": [{"variant": variant, "seed": seed, "tau": sum(per) / len(per), "tau_per_prompt": per,
                        "tau_per_cell": {"code": {"2048": per[0], "8000": per[1]}}, "loss": [[1, 5.0], [2, 4.0]]}
                       for variant, per in taus.items()],
              "seconds": 10.0 + seed}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(report))
    return str(path)


def test_ablation_merge_joins_calls_of_other_seeds_and_pairs_them_again(tmp_path, capsys):
    """--merge: two calls of one seed each (given seed 1 first) become one report of both seeds per
    variant, runs seed-major, and the paired deltas are recomputed over both seeds' prompts."""
    script = _ablation_script()
    seed1 = _ablation_call(script, tmp_path, "call-seed1", 1, {"base": [3.0, 2.0], "new": [2.0, 2.6]})
    seed0 = _ablation_call(script, tmp_path, "call-seed0", 0, {"base": [2.0, 3.0], "new": [2.5, 3.0]})
    out = tmp_path / "merged"
    assert script.main(["--merge", seed1, seed0, "--out", str(out)]) == 0
    report = json.loads((out / "ablation.json").read_text())
    assert [(run["variant"], run["seed"]) for run in report["runs"]] == [("base", 0), ("new", 0), ("base", 1), ("new", 1)]
    assert report["settings"]["seeds"] == [0, 1] and report["merged_from"] == [seed1, seed0]
    assert report["seconds"] == 21.0 and report["machines"] == [{"name": "call-seed1"}, {"name": "call-seed0"}]
    base, new = report["summary"]
    assert base["seeds"] == new["seeds"] == [0, 1] and base["paired_delta_mean"] == 0.0
    assert new["paired_delta_mean"] == pytest.approx((0.5 + 0.0 - 1.0 + 0.6) / 4)
    assert (new["prompts_better"], new["prompts_worse"]) == (2, 1)
    assert new["tau_mean"] == pytest.approx((2.75 + 2.3) / 2)
    assert new["tau_per_cell"]["code"] == pytest.approx({"2048": 2.25, "8000": 2.8})
    assert new["longest_over_shortest"]["code"] == pytest.approx(2.8 / 2.25)
    assert "| new | 2 | 2.525 | 2.30-2.75 | +0.025 | 2 / 1 |" in capsys.readouterr().out


def test_ablation_merge_keeps_the_start_that_one_call_measured(tmp_path, capsys):
    """--eval-start runs in the first call only (the starting draft is the same for every seed): the
    merge accepts calls that differ in it, keeps that start and pairs both seeds' runs with it."""
    script = _ablation_script()
    seed0 = _ablation_call(script, tmp_path, "call-seed0", 0, {"base": [2.0, 3.0], "new": [2.5, 3.0]}, eval_start=True)
    report = json.loads(Path(seed0).read_text())
    report["start"] = {"draft": "embedded", "tau": 2.5, "tau_per_prompt": [2.5, 2.5],
                       "tau_per_cell": {"code": {"2048": 2.5, "8000": 2.5}}}
    Path(seed0).write_text(json.dumps(report))
    seed1 = _ablation_call(script, tmp_path, "call-seed1", 1, {"base": [3.0, 2.0], "new": [2.0, 2.6]})
    assert script.main(["--merge", seed0, seed1, "--out", str(tmp_path / "merged")]) == 0
    merged = json.loads((tmp_path / "merged" / "ablation.json").read_text())
    assert merged["start"]["tau"] == 2.5
    assert merged["against_start"][1] == {"variant": "new", "paired_delta_mean": pytest.approx((0.0 + 0.5 - 0.5 + 0.1) / 4),
                                          "paired_delta_stderr": pytest.approx(0.275),  # prompts: -0.25, +0.3
                                          "prompts_better": 2, "prompts_worse": 1}
    assert "| start | code | 2.50 | 2.50 | 1.00x |" in capsys.readouterr().out



def test_ablation_merge_adds_a_variant_measured_in_a_later_call(tmp_path, capsys):
    """A variant trained in a later call on the same settings and prompts joins the report: paired with
    the first file's first variant of the same seed, listed after the first file's variants."""
    script = _ablation_script()
    both = _ablation_call(script, tmp_path, "both", 0, {"base": [2.0, 3.0], "new": [2.5, 3.0]})
    later = _ablation_call(script, tmp_path, "later", 0, {"wide": [3.0, 2.0]}, variants={"wide": {"seq_len": 8192}})
    assert script.main(["--merge", both, later, "--out", str(tmp_path / "merged")]) == 0
    merged = json.loads((tmp_path / "merged" / "ablation.json").read_text())
    assert merged["settings"]["variants"] == {"base": {}, "new": {"rollout_steps": 2}, "wide": {"seq_len": 8192}}
    assert [row["variant"] for row in merged["summary"]] == ["base", "new", "wide"]
    assert merged["summary"][2]["paired_delta_mean"] == pytest.approx((1.0 - 1.0) / 2)
    assert (merged["summary"][2]["prompts_better"], merged["summary"][2]["prompts_worse"]) == (1, 1)

def test_ablation_merge_refuses_repeated_runs_and_other_settings(tmp_path):
    """Runs of one (variant, seed) in two files, or files of other settings or prompts, would pair
    the wrong runs: refused, naming what repeats or differs, and nothing is written."""
    script = _ablation_script()
    taus = {"base": [2.0, 3.0], "new": [2.5, 3.0]}
    first = _ablation_call(script, tmp_path, "first", 0, taus)
    again = _ablation_call(script, tmp_path, "again", 0, taus)
    with pytest.raises(ValueError, match=r"runs repeat across the files: \[\('base', 0\), \('new', 0\)\]"):
        script.main(["--merge", first, again, "--out", str(tmp_path / "merged")])
    assert not (tmp_path / "merged").exists()
    other = _ablation_call(script, tmp_path, "other", 1, taus, steps=300, lr=0.123)
    with pytest.raises(ValueError, match=rf"{re.escape(other)} differs from {re.escape(first)} in lr, steps: not one"):
        script.merge_reports([first, other])
    variants = _ablation_call(script, tmp_path, "variants", 1, taus, variants={"base": {}, "new": {"rollout_steps": 3}})
    with pytest.raises(ValueError, match=r"differs from .* in variants \(new\): not one ablation"):
        script.merge_reports([first, variants])
    prompts = _ablation_call(script, tmp_path, "prompts", 1, taus,
                             prompts=[{"kind": "prose", "length": 2048}, {"kind": "code", "length": 8000}])
    with pytest.raises(ValueError, match=rf"{re.escape(prompts)} measured other eval prompts than"):
        script.merge_reports([first, prompts])
    # the same kinds and lengths, other token ids (another machine's text): refused where both reports
    # recorded the prompts' digests (since the sixteenth session), paired where one did not
    named = [{"kind": "code", "length": 2048, "digest": "a"}, {"kind": "code", "length": 8000, "digest": "b"}]
    ours = _ablation_call(script, tmp_path, "ours", 1, taus, prompts=named)
    theirs = _ablation_call(script, tmp_path, "theirs", 2, taus, prompts=[named[0], {**named[1], "digest": "c"}])
    with pytest.raises(ValueError, match=rf"{re.escape(theirs)} measured other eval prompts than"):
        script.merge_reports([ours, theirs])
    joined = script.merge_reports([first, ours])  # keeps the digests one file recorded, for the next check
    assert len(joined["runs"]) == 4 and joined["prompts"] == named
    with pytest.raises(ValueError, match=rf"{re.escape(theirs)} measured other eval prompts than"):
        script.merge_reports([first, ours, theirs])  # the file without digests first does not hide them


def _tiny_text_tree(root):
    """CorpusRoots of a small text tree: code (the biggest), docs (2 files: less than a 30% share) and
    licenses, each file over the corpus's 400-character minimum."""
    import random

    from hf_longspec.corpus import CorpusRoots

    rng = random.Random(0)
    words = "alpha beta gamma delta river stone file token chunk draft".split()

    def write(path, text):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    site, share = root / "site-packages", root / "share"
    for i in range(24):
        write(site / "pkg" / f"mod{i}.py", "".join(f"def f{j}(x):\n    return x * {j} + {i}\n"
                                                   for j in range(rng.randrange(14, 40))))
    for i in range(2):
        write(share / "doc" / f"tool{i}" / "README", " ".join(rng.choice(words) for _ in range(rng.randrange(80, 120))))
    for i in range(6):
        write(share / "common-licenses" / f"LICENSE-{i}", " ".join(rng.choice(words) for _ in range(rng.randrange(80, 300))))
    return CorpusRoots(site_packages=(site,), usr_share=share)


def _assert_same_chunks(joined, direct):
    assert joined.seq_len == direct.seq_len and joined.source_names == direct.source_names
    assert torch.equal(joined.chunks, direct.chunks) and torch.equal(joined.chunk_sources, direct.chunk_sources)
    if direct.prompt_mask is None:
        assert joined.prompt_mask is None
    else:
        assert torch.equal(joined.prompt_mask, direct.prompt_mask)
    if direct.mix_report is None:
        assert joined.mix_report is None
        return
    assert list(joined.mix_report) == list(direct.mix_report)
    for name, row in direct.mix_report.items():
        assert joined.mix_report[name] == pytest.approx(row, abs=1e-12), name  # epochs, share: float rounding


def test_ablation_regroups_short_chunks_into_what_a_longer_build_gives(tmp_path):
    """`regrouped`: the chunks of a k*L build made from an L build's (per source, the odd chunks at a
    source's end dropped) are the k*L build's own: same tokens, sources and token counts, and the
    mix report's epochs and shares; on a mix whose short source repeats, and on real local text."""
    from hf_longspec.training.data import LocalTextChunks

    script = _ablation_script()
    tokenizer, roots = ByteTokenizer(), _tiny_text_tree(tmp_path)
    mix = {"code": 0.5, "docs": 0.3, "licenses": 0.2}

    def build(seq_len):
        return LocalTextChunks(tokenizer, seq_len, 6000, mix=mix, roots=roots, max_epochs=2.0)

    short = build(16)
    counts = [int((short.chunk_sources == index).sum()) for index in range(len(short.source_names))]
    assert all(counts) and any(count % 2 for count in counts) and any(count % 3 for count in counts)
    assert short.mix_report["docs"]["short"] is False and short.mix_report["docs"]["epochs"] > 1  # repeated
    for factor in (2, 3, 4):
        _assert_same_chunks(script.regrouped(short, 16 * factor), build(16 * factor))
    for seq_len in (24, 16, 8, 16 * 10_000):  # not a multiple, the same, shorter, not one chunk left
        assert script.regrouped(short, seq_len) is None
    records_cut_at_ends = copy.copy(short)
    records_cut_at_ends.chat_windows = "end"
    assert script.regrouped(records_cut_at_ends, 32) is None
    # chat records cut like files: their prompt mask is regrouped with their tokens
    records = str(_answered_records(tmp_path / "records.jsonl", count=40))
    with_chat = [LocalTextChunks(tokenizer, seq_len, 6000, mix={**mix, "chat": 0.4}, chat_data=[records], roots=roots,
                                 max_epochs=2.0) for seq_len in (16, 48)]
    assert with_chat[0].prompt_mask.any() and (~with_chat[0].prompt_mask).any()
    _assert_same_chunks(script.regrouped(with_chat[0], 48), with_chat[1])
    # the legacy loader on this machine's real text
    real = [build_dataset(tokenizer, TrainRecipe(output_dir="", seq_len=seq_len, max_tokens=3000,
                                                 kinds=["code", "prose"])) for seq_len in (16, 32, 48)]
    _assert_same_chunks(script.regrouped(real[0], 32), real[1])
    _assert_same_chunks(script.regrouped(real[0], 48), real[2])


def test_ablation_builds_each_data_setting_once_and_regroups_longer_seq_lens(tmp_path, monkeypatch):
    """dataset_for: one build (from seed 0) per data setting; a seq_len that is a multiple of a built
    one is regrouped from it, not built; other seq_lens, other data fields and records cut at their
    ends are built."""
    from dataclasses import replace

    from hf_longspec.training.data import LocalTextChunks

    script = _ablation_script()
    tokenizer, roots = ByteTokenizer(), _tiny_text_tree(tmp_path)
    builds = []

    def build(tokenizer, recipe):
        builds.append((recipe.seq_len, recipe.seed, recipe.corpus_max_epochs, recipe.chat_windows))
        return LocalTextChunks(tokenizer, recipe.seq_len, recipe.max_tokens, seed=recipe.seed, mix=recipe.corpus_mix,
                               max_epochs=recipe.corpus_max_epochs, chat_windows=recipe.chat_windows, roots=roots)

    monkeypatch.setattr(script, "build_dataset", build)
    base = TrainRecipe(output_dir="", seq_len=16, max_tokens=6000, corpus_mix="code=0.5,docs=0.3,licenses=0.2",
                       corpus_max_epochs=2.0, seed=3)
    datasets = {}
    short = script.dataset_for(datasets, tokenizer, base)
    assert script.dataset_for(datasets, tokenizer, replace(base, seed=1)) is short
    assert builds == [(16, 0, 2.0, "stream")]
    for seq_len in (32, 48):
        _assert_same_chunks(script.dataset_for(datasets, tokenizer, replace(base, seq_len=seq_len)),
                            build(tokenizer, replace(base, seq_len=seq_len, seed=0)))
    assert builds == [(16, 0, 2.0, "stream"), (32, 0, 2.0, "stream"), (48, 0, 2.0, "stream")]  # the last two: the test's
    del builds[1:]
    assert script.dataset_for(datasets, tokenizer, replace(base, seq_len=24)).seq_len == 24
    script.dataset_for(datasets, tokenizer, replace(base, corpus_max_epochs=1.0))
    script.dataset_for(datasets, tokenizer, replace(base, chat_windows="end"))
    script.dataset_for(datasets, tokenizer, replace(base, chat_windows="end", seq_len=32))
    assert builds == [(16, 0, 2.0, "stream"), (24, 0, 2.0, "stream"), (16, 0, 1.0, "stream"), (16, 0, 2.0, "end"),
                      (32, 0, 2.0, "end")]


def test_cell_deltas_pair_each_prompt_with_the_start_per_cell(tmp_path, capsys):
    """plot_cell_deltas.py: per variant and (kind, length) cell, the mean over seeds and prompts of tau
    minus the start's tau on the same prompt, each seed's cell mean, and the pairs better / worse; a
    report without the start is refused."""
    script = load_script("benchmarks/plot_cell_deltas.py")
    prompts = [{"kind": "code", "length": 2048}, {"kind": "code", "length": 2048}, {"kind": "prose", "length": 8000}]
    report = {"start": {"tau": 3.0, "tau_per_prompt": [3.0, 2.0, 2.5]}, "prompts": prompts, "runs": [
        {"variant": "a", "seed": 0, "tau_per_prompt": [3.5, 2.0, 2.0]},
        {"variant": "a", "seed": 1, "tau_per_prompt": [2.5, 3.0, 3.5]},
        {"variant": "b", "seed": 0, "tau_per_prompt": [3.0, 2.0, 2.5]}]}
    rows = {(row["variant"], row["kind"]): row for row in script.cell_deltas(report)}
    assert rows["a", "code"]["delta_mean"] == pytest.approx((0.5 + 0.0 - 0.5 + 1.0) / 4)
    assert rows["a", "code"]["seed_means"] == {0: pytest.approx(0.25), 1: pytest.approx(0.25)}
    assert (rows["a", "code"]["better"], rows["a", "code"]["worse"]) == (2, 1)
    assert rows["a", "prose"]["delta_mean"] == pytest.approx(0.25) and rows["b", "prose"]["delta_mean"] == 0
    path = tmp_path / "ablation.json"
    path.write_text(json.dumps(report))
    assert script.main([str(path)]) == 0
    assert "| a | +0.25 (2/1) | +0.25 (1/1) |" in capsys.readouterr().out
    path.write_text(json.dumps({k: v for k, v in report.items() if k != "start"}))
    with pytest.raises(SystemExit):
        script.main([str(path)])


def test_answer_repeats_finds_where_an_answer_starts_to_loop(tmp_path):
    """answer_repeats.py: the first window that repeats an earlier one of the same answer (the prompt
    does not count), the share of repeating windows, and the summary per file and per task kind."""
    import gzip

    script = load_script("benchmarks/answer_repeats.py")
    assert script.first_repeat_and_share([1, 2, 3, 4, 5], 2) == (5, 0.0)
    assert script.first_repeat_and_share([7, 8, 9, 7, 8, 9, 7, 8], 3) == (3, pytest.approx(3 / 6))
    records = [{"input_ids": [7, 8, 9] + [1, 2, 3, 1, 2, 3, 1, 2], "prompt_tokens": 3, "answer_tokens": 8,
                "task": "continue"},
               {"input_ids": [1, 2, 3, 4, 5, 6], "prompt_tokens": 2, "answer_tokens": 4, "task": "summarize"}]
    path = tmp_path / "records.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write("".join(json.dumps(r) + "\n" for r in records))
    assert script.main([str(path), "--window", "3", "--eval-tokens", "4", "--out", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["tasks"]["continue"]["first_repeat_median"] == 3
    assert report["tasks"]["continue"]["repeating_window_share"] == pytest.approx(0.5)
    assert report["tasks"]["instructions"]["first_repeat_median"] == 4  # no repeat: the answer's length
    assert report["files"]["records.jsonl.gz"]["answers_at_the_longest"] == 1
    assert report["tasks"]["all"]["repeating_before_4"] == 0.5


def test_ablation_tau_per_cell_pools_each_cell_and_compares_8000_with_2048():
    """cell_taus pools tokens over rounds per (kind, length), not the mean of the prompts' tau; the
    summary's tau_per_cell is the mean over seeds, lengths in numeric order, and longest_over_shortest
    per kind the 8000-token cell over the 2048 one (None where the shortest is 0); old runs have none."""
    script = _ablation_script()

    def prompt(kind, length, emitted, rounds):
        return {"kind": kind, "length": length, "emitted_tokens": emitted, "rounds": rounds,
                "tau": emitted / max(rounds, 1)}

    rows = [prompt("code", 8000, 20, 10), prompt("code", 8000, 12, 2), prompt("code", 2048, 30, 10),
            prompt("code", 2048, 10, 2), prompt("code", 4096, 25, 10), prompt("prose", 8000, 15, 10),
            prompt("prose", 2048, 30, 10), prompt("chat", 8000, 10, 10), prompt("chat", 2048, 0, 0)]
    cells = script.cell_taus(rows)
    assert cells == {"code": pytest.approx({"8000": 32 / 12, "2048": 40 / 12, "4096": 2.5}),
                     "prose": pytest.approx({"8000": 1.5, "2048": 3.0}), "chat": {"8000": 1.0, "2048": 0.0}}
    runs = [{"variant": "base", "seed": 0, "tau": 2.5, "tau_per_prompt": [2.5], "tau_per_cell": cells},
            {"variant": "base", "seed": 1, "tau": 2.4, "tau_per_prompt": [2.4],
             "tau_per_cell": {"code": {"8000": 2.0, "4096": 2.5, "2048": 3.0}, "prose": {"8000": 1.5, "2048": 2.0}}},
            {"variant": "new", "seed": 0, "tau": 3.0, "tau_per_prompt": [3.0],
             "tau_per_cell": {"code": {"2048": 4.0, "8000": 4.4}}},
            {"variant": "old", "seed": 0, "tau": 2.0, "tau_per_prompt": [2.0]}]  # measured before cells
    base, new, old = script.summarize(runs)
    code = base["tau_per_cell"]["code"]
    assert list(code) == ["2048", "4096", "8000"]
    assert code == pytest.approx({"2048": (40 / 12 + 3.0) / 2, "4096": 2.5, "8000": (32 / 12 + 2.0) / 2})
    assert base["tau_per_cell"]["prose"] == pytest.approx({"2048": 2.5, "8000": 1.5})
    ratios = base["longest_over_shortest"]
    assert ratios["code"] == pytest.approx(code["8000"] / code["2048"]) and ratios["code"] < 1
    assert ratios["prose"] == pytest.approx(0.6) and ratios["chat"] is None
    assert new["tau_per_cell"] == {"code": {"2048": 4.0, "8000": 4.4}}
    assert new["longest_over_shortest"]["code"] == pytest.approx(1.1)
    assert "tau_per_cell" not in old and "longest_over_shortest" not in old
    assert script.cell_summary([{"tau_per_cell": {"code": {"2048": 2.0, "512": 4.0}}}])["longest_over_shortest"] == {
        "code": 0.5}  # 512 before 2048: numeric, not string, order
    lines = script.cell_table([base, new, old]).splitlines()
    assert lines[0] == "| variant | kind | 2048 | 4096 | 8000 | 8000 / 2048 |"
    assert lines[2:] == ["| base | code | 3.17 | 2.50 | 2.33 | 0.74x |", "| base | prose | 2.50 | - | 1.50 | 0.60x |",
                         "| base | chat | 0.00 | - | 1.00 | - |", "| new | code | 4.00 | - | 4.40 | 1.10x |"]
    assert script.cell_table([old]) == ""


def test_ablation_eval_prompts_continue_the_same_text_at_every_length(embedded):
    """The ablation's tau per (kind, length) cell compares contexts, not documents: each shorter
    prompt ends as the longest does; a chat prompt keeps its template whole."""
    _, tokenizer = embedded
    prompts = _ablation_script().eval_prompts(tokenizer, [120, 300], ["code", "chat"], 1, "cpu")
    assert [(kind, length) for kind, length, _ in prompts] == [("code", 120), ("code", 300), ("chat", 120), ("chat", 300)]
    (_, _, code_short), (_, _, code_long), (_, _, chat_short), (_, _, chat_long) = prompts
    assert code_short[0].tolist() == code_long[0, -120:].tolist()
    assert chat_short.shape == (1, 120) and chat_short[0, -60:].tolist() == chat_long[0, -60:].tolist()
    assert tokenizer.decode(chat_short[0]).startswith("<|im_start|>system")


def test_resume_refuses_a_checkpoint_of_another_shape_before_training(tmp_path, monkeypatch):
    """--resume with other draft settings than the run started with (here a 2x wider MLP): a clear error
    naming the weights whose shapes differ and what is allowed, raised before any step, and the run's
    folder left as it was (the Trainer would load the data first and then fail inside load_state_dict)."""
    from hf_longspec.errors import TrainingRecipeError

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=2, max_positions=1024, initializer_range=0.2)
    recipe = TrainRecipe(output_dir=str(tmp_path / "run"), max_steps=2, seq_len=32, batch_size=2, warmup_steps=0,
                         max_tokens=20_000, save_steps=1, logging_steps=1, kinds=["prose"])
    train_draft(target, ByteTokenizer(), recipe, progress=False)
    width = LongSpecDraftModel.from_pretrained(str(tmp_path / "run" / "final")).config.intermediate_size
    before = sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in (tmp_path / "run").rglob("*"))

    wider = TrainRecipe(**{**asdict(recipe), "max_steps": 4, "resume": True,
                           "draft_overrides": {"intermediate_size": 2 * width}})
    def no_data(*args, **kwargs):
        raise AssertionError("the data was read before the checkpoint was checked")

    with monkeypatch.context() as patch, pytest.raises(
            TrainingRecipeError, match=rf"checkpoint-2 .*mlp.gate_proj.weight: \({width}, 32\) there, "
                                      rf"\({2 * width}, 32\) here.*Allowed"):
        patch.setattr("hf_longspec.training.run.build_dataset", no_data)
        train_draft(target, ByteTokenizer(), wider, progress=False)
    assert sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in (tmp_path / "run").rglob("*")) == before

    # the same settings resume as before
    train_draft(target, ByteTokenizer(), TrainRecipe(**{**asdict(recipe), "max_steps": 3, "resume": True}), progress=False)
    assert (tmp_path / "run" / "checkpoint-3").is_dir()


def test_a_draft_reading_several_target_layers_trains_on_all_of_them(tmp_path):
    """extra_target_layer_indices: the trainer hands the draft the K/V of every layer it reads, side by side
    on the head axis in `target_layers` order, and train_draft trains and saves such a draft (every
    query block of its cross-attention moves)."""
    from transformers import DynamicCache, TrainingArguments

    from hf_longspec.target_support import cache_argument_name, target_layer_kv
    from hf_longspec.training.trainer import LongSpecTrainer

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=3, max_positions=1024, initializer_range=0.2)
    draft = LongSpecDraftModel.from_target(target, sliding_window=16, extra_target_layer_indices=[0])
    args = TrainingArguments(output_dir=str(tmp_path / "args"), use_cpu=True, report_to="none")
    trainer = LongSpecTrainer(model=draft, args=args, target=target)
    ids = torch.randint(0, 257, (2, 24), generator=torch.Generator().manual_seed(0))
    positions = torch.arange(24)[None].expand(2, -1)
    keys, values, _ = trainer.target_signals(draft, ids, positions)
    with torch.no_grad():
        cache = DynamicCache(config=target.config)
        target(ids, position_ids=positions, use_cache=True, **{cache_argument_name(target): cache})
    (k2, v2), (k0, v0) = target_layer_kv(cache, 2), target_layer_kv(cache, 0)
    assert torch.equal(keys, torch.cat([k2, k0], dim=1)) and torch.equal(values, torch.cat([v2, v0], dim=1))

    recipe = TrainRecipe(output_dir=str(tmp_path / "run"), max_steps=8, seq_len=32, batch_size=2, learning_rate=1e-2,
                         warmup_steps=0, max_tokens=20_000, save_steps=100, logging_steps=1, kinds=["prose"],
                         draft_overrides={"sliding_window": 16, "extra_target_layer_indices": [0]})
    initial = LongSpecDraftModel.from_target(target, **recipe.draft_overrides)
    before = initial.cross_attn.q_proj.weight.detach().clone()
    trained = train_draft(target, ByteTokenizer(), recipe, draft=initial, progress=False)
    moved = (trained.cross_attn.q_proj.weight.detach() - before).abs().view(2, -1).amax(dim=1)  # per layer block
    assert torch.all(moved > 1e-3), moved
    reloaded = LongSpecDraftModel.from_pretrained(tmp_path / "run" / "final").bind(target)
    assert reloaded.target_layers == (2, 0)


def test_a_draft_drawn_from_the_target_computes_its_first_layer_and_queries_each_layer_it_reads(tmp_path, capsys):
    """draft_init="target" (training/target_init.py): with the cross-attention's output zeroed, the new draft's
    logits are those of the target cut to its first layer (self-attention, MLP and both norms copied, RoPE and
    the final norm shared); each cross-attention block holds the q_proj rows and o_proj columns of the layer it
    reads, in target_layers order; train_draft builds it for a new draft only, and --draft-init reaches it."""
    from transformers import LlamaForCausalLM

    from hf_longspec.cli import main
    from hf_longspec.target_support import target_layers_kv
    from hf_longspec.training.run import new_draft

    target = tiny_llama(vocab_size=257, hidden_size=32, layers=3, max_positions=1024, initializer_range=0.2)
    recipe = TrainRecipe(output_dir="", draft_init="target", draft_overrides={"sliding_window": 16,
                                                                              "extra_target_layer_indices": [0]})
    draft = new_draft(target, recipe)
    assert draft.target_layers == (2, 0)
    features = 4 * 8  # 4 query heads of 8 per block
    for block, layer in enumerate((2, 0)):
        attention = target.model.layers[layer].self_attn
        assert torch.equal(draft.cross_attn.q_proj.weight[block * features:(block + 1) * features], attention.q_proj.weight)
        assert torch.equal(draft.cross_attn.o_proj.weight[:, block * features:(block + 1) * features],
                           attention.o_proj.weight)
    assert torch.equal(draft.cross_attn_layernorm.weight, target.model.layers[2].input_layernorm.weight)

    ids = torch.randint(0, 257, (1, 12), generator=torch.Generator().manual_seed(3))
    one_layer = copy.deepcopy(target.config)
    one_layer.num_hidden_layers = 1
    first_layer_only = LlamaForCausalLM(one_layer).eval()
    first_layer_only.load_state_dict(target.state_dict(), strict=False)
    with torch.no_grad():
        keys, values = target_layers_kv(target(ids, use_cache=True).past_key_values, (2, 0))
        draft.cross_attn.o_proj.weight.zero_()
        torch.testing.assert_close(draft(ids, keys, values, noise_shift=2).logits, first_layer_only(ids).logits)

    from transformers import Qwen3Config, Qwen3ForCausalLM  # q/k norms the draft has no place for: left out

    qwen3 = Qwen3ForCausalLM(Qwen3Config(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2, head_dim=8)).eval()
    started = new_draft(qwen3, TrainRecipe(output_dir="", draft_init="target", draft_overrides={"sliding_window": 16}))
    assert torch.equal(started.self_attn.k_proj.weight, qwen3.model.layers[0].self_attn.k_proj.weight)
    random_start = new_draft(target, TrainRecipe(output_dir="", draft_overrides={"sliding_window": 16}))
    assert not torch.equal(random_start.mlp.down_proj.weight, target.model.layers[0].mlp.down_proj.weight)
    with pytest.raises(TrainingRecipeError, match="draft's mlp.gate_proj.weight is \\(96, 32\\), the target's \\(64, 32\\)"):
        new_draft(target, TrainRecipe(output_dir="", draft_init="target", draft_overrides={"intermediate_size": 96}))
    with pytest.raises(TrainingRecipeError, match="draft_init='bogus'; allowed: \\('random', 'target'\\)"):
        TrainRecipe(output_dir="", draft_init="bogus").check()
    with pytest.raises(TrainingRecipeError, match="a draft continued from trained weights keeps them"):
        TrainRecipe(output_dir="", draft_init="target", init_draft="embedded").check()
    # the command line: the refusal comes before any target is loaded, and leaves no output folder
    assert main(["train", "--output", str(tmp_path / "run"), "--draft-init", "target", "--init-draft", "embedded"]) == 2
    assert "draft_init='target' with init_draft='embedded'" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()

    trained_recipe = TrainRecipe(output_dir=str(tmp_path / "trained"), draft_init="target", max_steps=3, seq_len=32,
                                 batch_size=2, warmup_steps=0, max_tokens=20_000, save_steps=100, logging_steps=1,
                                 kinds=["prose"], draft_overrides={"sliding_window": 16})
    train_draft(target, ByteTokenizer(), trained_recipe, progress=False)
    saved = json.loads((tmp_path / "trained" / "final" / "training_recipe.json").read_text())
    assert saved["draft_init"] == "target"
