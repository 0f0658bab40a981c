"""One training run: target + local text + LongSpecTrainer -> a saved draft folder."""

from __future__ import annotations

import inspect
import json
import math
import shutil
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
from transformers import TrainingArguments

from ..configuration_longspec import LongSpecDraftConfig
from ..corpus import DEFAULT_MIX
from ..errors import TrainingRecipeError
from ..modeling_longspec import LongSpecDraftModel
from ..publishing.draft_files import TRAINING_DATA_FILE, TRAINING_SPEED_FILE
from .collator import LongSpecCollator
from .data import LocalTextChunks
from .trainer import LongSpecTrainer, SpeedLog, StopAtDeadline
from .widen import add_entry_input, add_length_scaling, add_target_layers, widen_mlp

CHAT_LOSSES = ("all", "answer")  # TrainRecipe.chat_loss: where a chat record's loss is taken


@dataclass
class TrainRecipe:
    """Everything that defines a run; saved next to the draft as training_recipe.json."""

    output_dir: str
    max_steps: int = 1000
    seq_len: int = 2048
    batch_size: int = 8
    grad_accum: int = 1
    learning_rate: float = 1e-3
    warmup_steps: int = 50
    weight_decay: float = 0.0
    max_tokens: int = 20_000_000
    anchor_offset: bool = True
    noisy: bool = True
    # Flash Noisy Training's shift per step: None draws it uniformly from 1..depth+1 (every draft so far;
    # inference uses 1..depth), weights [w1, w2, ...] draw shift s with probability w_s / sum (positions.py)
    noise_shift_weights: list[float] | None = None
    distill: str = "argmax"
    # Multi-step rollout (docs/training.md): K steps, step k >= 2 fed the draft's own argmax of step
    # k - 1 and a cross-attention lag grown by k - 1; losses weighted rollout_decay ** (k - 1).
    # 1 = teacher-forced training only, exactly as before the option existed.
    rollout_steps: int = 1
    rollout_decay: float = 0.8
    # Text: `corpus_mix` (a preset of corpus.MIX_PRESETS, "code=0.4,docs=0.3,..." or a dict of
    # source weights), or `kinds` (the original loader: whole kinds in their natural proportions).
    # Neither given: the default mix corpus.DEFAULT_MIX ("wide").
    kinds: list[str] | None = None
    corpus_mix: str | dict | None = None
    chat_data: list[str] = field(default_factory=list)  # jsonl files of training/chat_data.py (source "chat")
    corpus_max_epochs: float = 1.0  # passes over a source that is smaller than its share
    # how chat records become chunks (training/data.py): "stream" (cut like files) or "end" (one
    # chunk per record, ending where the target's answer ends)
    chat_windows: str = "stream"
    # where a chat record's loss is taken: "all" its tokens, or "answer" (the target's own writing
    # only; its document, mostly human text, is read as context). Needs chat_windows="end" (every
    # record's chunk then ends in its answer) and token labels (distill "argmax" or "none").
    chat_loss: str = "all"
    # a folder for the tokenized chunks: a later start with the same data (a resumed call on the same
    # machine) loads them instead of tokenizing again (training/data_cache.py)
    data_cache: str | None = None
    seed: int = 0
    save_steps: int = 500
    logging_steps: int = 10
    resume: bool = False
    max_seconds: float | None = None  # stop (and save a checkpoint) after this much training time
    overwrite_output: bool = False  # replace the checkpoints and final/ a previous run left in output_dir
    draft_overrides: dict = field(default_factory=dict)
    # Start from trained weights instead of a random draft: "embedded" (the shipped draft) or a saved
    # draft folder. A short run on new text (chat) then refines the draft instead of starting over.
    init_draft: str | None = None
    # How a new draft's weights start (training/target_init.py): "random", or "target" (its layer from the
    # target's first layer, its cross-attention blocks from the q/o projections of the layers they read)
    draft_init: str = "random"

    def __post_init__(self):
        if self.kinds is None and self.corpus_mix is None:
            self.corpus_mix = DEFAULT_MIX

    def check(self) -> None:
        """Refuse settings that cannot give a sensible run, naming the value and what is allowed.

        Cheap (no model, no data): the CLI calls it before loading anything."""
        from ..training.trainer import DISTILL_MODES

        positive = {"max_steps": self.max_steps, "seq_len": self.seq_len, "batch_size": self.batch_size,
                    "grad_accum": self.grad_accum, "save_steps": self.save_steps,
                    "logging_steps": self.logging_steps, "max_tokens": self.max_tokens}
        for name, value in positive.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TrainingRecipeError(f"{name}={value!r}; allowed: a positive int (>= 1).")
        if self.seq_len < 2:
            raise TrainingRecipeError(f"seq_len={self.seq_len}; allowed: >= 2 (a chunk needs a next token to predict).")
        if self.max_tokens < self.seq_len:
            raise TrainingRecipeError(
                f"max_tokens={self.max_tokens} is less than seq_len={self.seq_len}: training reads at most max_tokens "
                "tokens of local text and cuts them into seq_len-token chunks, so not one chunk fits. Allowed: "
                f"max_tokens >= seq_len (e.g. --max-tokens {self.seq_len * self.batch_size * 16} "
                "or a smaller --seq-len)."
            )
        if self.max_seconds is not None and not (isinstance(self.max_seconds, (int, float)) and self.max_seconds > 0):
            raise TrainingRecipeError(f"max_seconds={self.max_seconds!r}; allowed: None or a number of seconds > 0.")
        if self.data_cache is not None and Path(self.data_cache).exists() and not Path(self.data_cache).is_dir():
            raise TrainingRecipeError(f"data_cache={self.data_cache!r} exists and is not a folder; allowed: a folder "
                                      "(made when missing) or None.")
        if not self.learning_rate > 0:
            raise TrainingRecipeError(f"learning_rate={self.learning_rate!r}; allowed: a number > 0.")
        if isinstance(self.warmup_steps, bool) or not isinstance(self.warmup_steps, int) or self.warmup_steps < 0:
            raise TrainingRecipeError(f"warmup_steps={self.warmup_steps!r}; allowed: an int >= 0.")
        if self.distill not in DISTILL_MODES:
            raise TrainingRecipeError(f"distill={self.distill!r}; allowed: {DISTILL_MODES}.")
        from .data import CHAT_WINDOWS

        if self.chat_windows not in CHAT_WINDOWS:
            raise TrainingRecipeError(f"chat_windows={self.chat_windows!r}; allowed: {CHAT_WINDOWS}.")
        self._check_chat_loss()
        from .target_init import DRAFT_INITS

        if self.draft_init not in DRAFT_INITS:
            raise TrainingRecipeError(f"draft_init={self.draft_init!r}; allowed: {DRAFT_INITS}.")
        if self.draft_init != "random" and self.init_draft is not None:
            raise TrainingRecipeError(f"draft_init={self.draft_init!r} with init_draft={self.init_draft!r}: a draft "
                                      "continued from trained weights keeps them. Allowed: draft_init='random' with "
                                      "init_draft, or draft_init='target' for a new draft (no init_draft).")
        steps = self.rollout_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps < self.seq_len:
            raise TrainingRecipeError(f"rollout_steps={steps!r}; allowed: an int from 1 (no rollout) to seq_len - 1 "
                                      f"({self.seq_len - 1}); the tree's depth (5 by default) is the natural largest.")
        self._check_noise_shift_weights()
        if isinstance(self.rollout_decay, bool) or not (isinstance(self.rollout_decay, (int, float))
                                                         and 0 < self.rollout_decay <= 1):
            raise TrainingRecipeError(f"rollout_decay={self.rollout_decay!r}; allowed: a number in (0, 1].")
        try:  # the draft settings asked for (window, layers read, ...), before any model is loaded
            LongSpecDraftConfig(**self.draft_overrides)
        except ValueError as error:
            raise TrainingRecipeError(f"draft_overrides: {error}") from None
        from ..corpus import KINDS, parse_mix

        epochs = self.corpus_max_epochs
        if isinstance(epochs, bool) or not isinstance(epochs, (int, float)) or not epochs > 0:
            raise TrainingRecipeError(f"corpus_max_epochs={epochs!r}; allowed: a number > 0 (passes over a source "
                                      "smaller than its share).")
        try:
            parse_mix(self.corpus_mix)
        except ValueError as error:
            raise TrainingRecipeError(f"corpus_mix={self.corpus_mix!r}: {error}") from None
        if self.kinds is not None and (not self.kinds or any(kind not in KINDS for kind in self.kinds)):
            raise TrainingRecipeError(f"kinds={self.kinds!r}; allowed: None (the corpus mix) or a non-empty list "
                                      f"drawn from {KINDS}.")
        if self.resume and self.overwrite_output:
            raise TrainingRecipeError(
                "resume and overwrite_output contradict each other: --resume continues the checkpoints in "
                f"{self.output_dir}, --overwrite-output deletes them. Pass one of them."
            )
        check_output_dir(self.output_dir, self.resume, self.overwrite_output)

    def _check_noise_shift_weights(self) -> None:
        weights = self.noise_shift_weights
        if weights is None:
            return
        numbers = isinstance(weights, (list, tuple)) and all(
            isinstance(w, (int, float)) and not isinstance(w, bool) and math.isfinite(w) and w >= 0 for w in weights)
        if not numbers or not weights or not sum(weights) > 0 or len(weights) >= self.seq_len:
            raise TrainingRecipeError(
                f"noise_shift_weights={weights!r}; allowed: None (uniform shifts 1..depth+1) or a list of finite "
                f"weights >= 0 for shifts 1, 2, ..., not all 0, shorter than seq_len ({self.seq_len}).")
        if not self.noisy:
            raise TrainingRecipeError(f"noise_shift_weights={weights!r} with noisy=False: without Flash Noisy "
                                      "Training the shift is always 1. Allowed: one of them.")

    def _check_chat_loss(self) -> None:
        if self.chat_loss not in CHAT_LOSSES:
            raise TrainingRecipeError(f"chat_loss={self.chat_loss!r}; allowed: {CHAT_LOSSES}.")
        if self.chat_loss == "all":
            return
        from ..corpus import parse_mix

        try:
            chat_weight = parse_mix(self.corpus_mix).get("chat", 0) if self.corpus_mix is not None else 0
        except ValueError as error:
            raise TrainingRecipeError(f"corpus_mix={self.corpus_mix!r}: {error}") from None
        if not (chat_weight > 0 and self.chat_data):
            raise TrainingRecipeError("chat_loss='answer' takes the loss on chat records' answers, but this recipe "
                                      "trains on no chat records. Allowed: a corpus mix with a chat share and "
                                      "chat_data files, or chat_loss='all'.")
        if self.chat_windows != "end":
            raise TrainingRecipeError(f"chat_loss='answer' with chat_windows={self.chat_windows!r}: a record cut "
                                      "like a file can give chunks with no answer token. Allowed: chat_windows='end'.")
        if self.distill == "soft":
            raise TrainingRecipeError("chat_loss='answer' with distill='soft': the answer mask needs token labels. "
                                      "Allowed: distill 'argmax' or 'none'.")
        if self.seq_len < 3:
            raise TrainingRecipeError(f"chat_loss='answer' with seq_len={self.seq_len}: a record's chunk ends in its "
                                      "last answer token and a separator, and that token needs one before it to be "
                                      "predicted from. Allowed: seq_len >= 3.")


def check_output_dir(output_dir: str, resume: bool, overwrite: bool) -> None:
    """A run writes checkpoint-*/ and final/ into output_dir: refuse to mix with, or silently replace,
    what an earlier run left there unless `resume` or `overwrite` says what to do with it."""
    folder = Path(output_dir)
    if folder.exists() and not folder.is_dir():
        raise TrainingRecipeError(f"output folder {folder} exists and is not a folder; allowed: a new or empty folder.")
    if overwrite or not folder.exists():
        return
    entries = sorted(p.name for p in folder.iterdir())
    if resume:
        if entries and not any(folder.glob("checkpoint-*")):
            raise TrainingRecipeError(
                f"resume: output folder {folder} holds no checkpoint-* to continue from (it holds "
                f"{', '.join(entries[:6])}{', ...' if len(entries) > 6 else ''}); a new run would overwrite final/. "
                "Allowed: --resume on a folder with checkpoints (or a new/empty one), or --overwrite-output."
            )
        return
    if entries:
        shown = ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "")
        raise TrainingRecipeError(
            f"output folder {folder} is not empty (it holds {shown}); a new run would delete its checkpoints and "
            "overwrite final/. Allowed: a new or empty folder, --resume to continue the run saved there, or "
            "--overwrite-output to replace it (resume=True / overwrite_output=True in a TrainRecipe)."
        )


def check_resumable(draft: LongSpecDraftModel, output_dir: str) -> None:
    """--resume loads the newest checkpoint into `draft`: refuse one saved with other shapes (a run started
    with another --intermediate-size, say) or other weights, before any data is read or step taken. The
    Trainer would fail inside load_state_dict on a shape, and only warn on a missing or extra weight (it
    loads with strict=False), leaving that weight untrained or at its initial value. Sharded (FSDP)
    checkpoints are left to the Trainer's own check."""
    from safetensors import safe_open
    from transformers.trainer_utils import get_last_checkpoint

    newest = get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None
    weights = Path(newest) / "model.safetensors" if newest else None
    if weights is None or not weights.is_file():
        return
    with safe_open(str(weights), framework="pt") as saved_file:
        saved = {name: tuple(saved_file.get_slice(name).get_shape()) for name in saved_file.keys()}
    here = {name: tuple(value.shape) for name, value in draft.state_dict().items()}
    differ = [f"{name}: {saved.get(name, 'absent')} there, {here.get(name, 'absent')} here"
              for name in sorted(saved.keys() | here.keys()) if saved.get(name) != here.get(name)]
    if differ:
        shown = "; ".join(differ[:4]) + ("; ..." if len(differ) > 4 else "")
        raise TrainingRecipeError(
            f"resume: {Path(newest).name} in {output_dir} holds a draft of other shapes than this run's ({shown}). "
            "Allowed: the draft settings the run started with (its checkpoint's config.json; e.g. the same "
            "--intermediate-size), or a new output folder.")


def _clear_previous_run(output_dir: str) -> None:
    """overwrite_output: remove the checkpoints and final/ of the earlier run (nothing else)."""
    folder = Path(output_dir)
    if not folder.is_dir():
        return
    for path in [*folder.glob("checkpoint-*"), folder / "final"]:
        if path.is_dir():
            shutil.rmtree(path)


def build_dataset(tokenizer, recipe: TrainRecipe) -> LocalTextChunks:
    """Token chunks of local text for a recipe (tokenized once; reusable across runs), loaded from
    `recipe.data_cache` when an earlier start saved the same ones there (training/data_cache.py)."""
    arguments = loader_arguments(recipe)
    if recipe.data_cache is not None:
        from .data_cache import load_or_build

        return load_or_build(recipe.data_cache, tokenizer, arguments)
    return LocalTextChunks(tokenizer, **arguments)


def loader_arguments(recipe: TrainRecipe) -> dict:
    """What LocalTextChunks is given for a recipe, besides the tokenizer: the whole of what decides the
    chunks (the data cache's key hashes exactly this)."""
    common = {"seq_len": recipe.seq_len, "max_tokens": recipe.max_tokens, "seed": recipe.seed}
    if recipe.corpus_mix is None:
        return {**common, "kinds": tuple(recipe.kinds)}
    return {**common, "mix": recipe.corpus_mix, "chat_data": tuple(recipe.chat_data),
            "max_epochs": recipe.corpus_max_epochs, "chat_windows": recipe.chat_windows}


def initial_draft(target, recipe: TrainRecipe) -> LongSpecDraftModel:
    """The draft `recipe.init_draft` names, loaded for `target`; refused when its settings contradict the
    recipe's draft overrides (a 1024-token window asked of a draft trained with 512 would silently win).
    An `intermediate_size` override wider than the draft's MLP grows it, a `cross_attention_length_scale`
    override adds the learned log-length temperature to a draft without it, a `target_entry_input=True`
    override the direct read of the newest target entry, an `extra_target_layer_indices` override on a draft
    that reads one layer its reads of those layers too (training/widen.py). A target_layer_index override
    must name the layer the draft reads (-1 or its number). A `lookup_tokens` override sets the chain it decodes with,
    `cpu_tree_widths`, `cpu_lookup_tokens` and `cpu_plain_steps` how it decodes on a CPU, a `cross_attention_window` override
    the window it reads, in training and after."""
    from ..embedded import embedded_draft_dir

    folder = embedded_draft_dir() if recipe.init_draft == "embedded" else Path(recipe.init_draft)
    draft = LongSpecDraftModel.from_pretrained(str(folder), dtype=torch.float32)
    overrides = dict(recipe.draft_overrides)
    if "intermediate_size" in overrides:  # a wider MLP grows from the trained one, computing the same at first
        draft = widen_mlp(draft, int(overrides.pop("intermediate_size")), seed=recipe.seed)
    if overrides.get("cross_attention_length_scale") is not None:
        draft = add_length_scaling(draft, overrides.pop("cross_attention_length_scale"))
    if overrides.get("target_entry_input") is True:
        draft = add_entry_input(draft)
        overrides.pop("target_entry_input")
    if "extra_target_layer_indices" in overrides:  # new query blocks, computing the same at first
        draft = add_target_layers(draft, overrides.pop("extra_target_layer_indices"), seed=recipe.seed)
    decoding = ("lookup_tokens", "tree_rerank_leaves", "cpu_tree_widths", "cpu_lookup_tokens", "cpu_tree_rerank_leaves",
                "cpu_plain_steps", "cross_attention_window")
    for name in decoding:  # what it decodes with or reads, not a weight:
        if name in overrides:  # a continued draft takes the one asked for (a window: fine-tuned to read it)
            setattr(draft.config, name, overrides.pop(name))
    if "target_layer_index" in overrides and _same_layer(draft.config, overrides["target_layer_index"]):
        overrides.pop("target_layer_index")  # -1 and the last layer's number name one layer
    clashes = {name: (getattr(draft.config, name, None), wanted) for name, wanted in overrides.items()
               if getattr(draft.config, name, None) != wanted}
    if clashes:
        detail = ", ".join(f"{name}={have!r} there, {wanted!r} asked" for name, (have, wanted) in clashes.items())
        raise TrainingRecipeError(f"init_draft={recipe.init_draft!r} was trained with other settings ({detail}). "
                                  "Allowed: the draft's own settings, or no init_draft (a new draft).")
    return draft  # train_draft binds it, which refuses a draft made for another target


def _same_layer(config, asked: int) -> bool:
    """Whether `asked` names the layer a saved draft's config reads (-1 and the last layer's number do)."""
    return config.resolve_layer(asked) == config.resolve_layer(config.target_layer_index)


def new_draft(target, recipe: TrainRecipe) -> LongSpecDraftModel:
    """An untrained draft for `target` with the recipe's overrides, its weights drawn from `recipe.seed`:
    the Trainer seeds only after the draft exists, so they would otherwise come from whatever state
    torch's global generator happened to be in. Its config verifies the prompt-lookup chain beside the tree,
    re-ranks the tree's leaves, and names the small round a CPU drafts (its leaves not re-ranked) and its plain
    steps, as the shipped draft's does, unless the overrides
    say otherwise:
    a draft a user trains decodes like the shipped one."""
    from ..generation.lookup import TRAINED_DRAFT_LOOKUP_TOKENS
    from ..generation.tree_budget import TRAINED_DRAFT_CPU_LOOKUP_TOKENS, TRAINED_DRAFT_CPU_TREE_WIDTHS

    decoding = {"lookup_tokens": TRAINED_DRAFT_LOOKUP_TOKENS, "tree_rerank_leaves": True,
                "cpu_tree_widths": list(TRAINED_DRAFT_CPU_TREE_WIDTHS), "cpu_lookup_tokens": TRAINED_DRAFT_CPU_LOOKUP_TOKENS,
                "cpu_tree_rerank_leaves": False, "cpu_plain_steps": True}
    device = target.get_input_embeddings().weight.device
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(recipe.seed)
        draft = LongSpecDraftModel.from_target(target, **{**decoding, **recipe.draft_overrides})
    if recipe.draft_init == "target":
        from .target_init import start_from_target

        start_from_target(draft, target)
    return draft


def train_draft(target, tokenizer, recipe: TrainRecipe, draft: LongSpecDraftModel | None = None,
                progress: bool = True, dataset=None, callbacks=None) -> LongSpecDraftModel:
    """Train (or continue training) a draft for `target`; returns the trained, bound draft (under FSDP
    the sharded module: load OUTPUT/final, which rank 0 writes whole, for a draft to use)."""
    recipe.check()
    device = target.get_input_embeddings().weight.device
    on_gpu = device.type == "cuda"
    if draft is None and recipe.init_draft is not None:
        draft = initial_draft(target, recipe)
    if draft is None:
        draft = new_draft(target, recipe)
    if recipe.overwrite_output:
        _clear_previous_run(recipe.output_dir)
    if recipe.resume:
        check_resumable(draft, recipe.output_dir)
    draft = draft.to(device=device, dtype=torch.float32).train()  # master weights fp32; bf16 autocast on GPU
    draft.bind(target)
    config = target.config.get_text_config()
    collator = LongSpecCollator(
        max_positions=config.max_position_embeddings,
        num_anchors=draft.config.num_anchor_tokens,
        max_noise_shift=len(draft.config.tree_widths) + 1,
        anchor_offset=recipe.anchor_offset,
        noisy=recipe.noisy,
        noise_shift_weights=None if recipe.noise_shift_weights is None else tuple(recipe.noise_shift_weights),
        seed=recipe.seed,
        answer_only=recipe.chat_loss == "answer",
    )
    arguments = dict(
        output_dir=recipe.output_dir,
        max_steps=recipe.max_steps,
        per_device_train_batch_size=recipe.batch_size,
        gradient_accumulation_steps=recipe.grad_accum,
        learning_rate=recipe.learning_rate,
        warmup_steps=recipe.warmup_steps,
        weight_decay=recipe.weight_decay,
        lr_scheduler_type="cosine",
        bf16=on_gpu and torch.cuda.is_bf16_supported(),
        logging_steps=recipe.logging_steps,
        save_steps=recipe.save_steps,
        save_total_limit=2,
        report_to="none",
        remove_unused_columns=False,
        dataloader_num_workers=0,
        disable_tqdm=not progress,
        seed=recipe.seed,
        use_cpu=not on_gpu,
    )
    accepted = inspect.signature(TrainingArguments.__init__).parameters
    args = TrainingArguments(**{k: v for k, v in arguments.items() if k in accepted})
    if dataset is None:
        # with a cache, each machine's first process tokenizes and saves the chunks while the others wait,
        # then they load them; without one, every rank tokenizes for itself, as it must
        first = args.main_process_first(local=True, desc="tokenizing") if recipe.data_cache else nullcontext()
        with first:
            dataset = build_dataset(tokenizer, recipe)
    speed = SpeedLog(recipe.batch_size * recipe.grad_accum * args.world_size * recipe.seq_len)
    extra = [speed] + ([StopAtDeadline(recipe.max_seconds)] if recipe.max_seconds else [])
    trainer = LongSpecTrainer(
        model=draft, args=args, train_dataset=dataset, data_collator=collator, target=target, distill=recipe.distill,
        rollout_steps=recipe.rollout_steps, rollout_decay=recipe.rollout_decay,
        callbacks=[*(callbacks or []), *extra],
    )
    resume = recipe.resume and any(Path(recipe.output_dir).glob("checkpoint-*"))
    trainer.train(resume_from_checkpoint=True if resume else None)
    speed_report = speed.report()  # a collective: every rank
    final_dir = Path(recipe.output_dir) / "final"
    draft.eval()
    trainer.save_model(str(final_dir))  # the main process writes; every rank waits for it
    if trainer.is_world_process_zero():
        (final_dir / "training_args.bin").unlink(missing_ok=True)  # a pickle: keep the folder Hub-ready
        (final_dir / "training_recipe.json").write_text(json.dumps(asdict(recipe), indent=2))
        (final_dir / "training_log.json").write_text(json.dumps(trainer.state.log_history, indent=2))
        (final_dir / TRAINING_SPEED_FILE).write_text(json.dumps(
            {**speed_report, "global_step": trainer.state.global_step, "world_size": args.world_size,
             "fsdp": bool(trainer.is_fsdp_enabled)}, indent=2))
        if getattr(dataset, "mix_report", None):  # what each corpus source actually contributed
            (final_dir / TRAINING_DATA_FILE).write_text(json.dumps(dataset.mix_report, indent=2))
    return draft
