"""The draft's model card: huggingface_hub's ModelCard filled from what the folder and the
caller's benchmark JSON actually say (anything absent reads "not measured" / "not recorded")."""

from __future__ import annotations

import json
import re
from pathlib import Path

from huggingface_hub import ModelCard, ModelCardData

from ..configuration_longspec import LongSpecDraftConfig
from ..corpus import SOURCE_DESCRIPTIONS, parse_mix
from .draft_files import (
    CARD_FILE, RECIPE_FILE, TRAINING_DATA_FILE, TRAINING_LOG_FILE, TRAINING_SPEED_FILE, draft_tensor_infos, read_json,
)
from .measurements import DRAFT_WEIGHTS, BenchmarkResults, BenchmarkRun, load_benchmark
from .package_files import card_template_path
from .weights_digest import folder_weights_digest

LIBRARY_NAME = "transformers"
PIPELINE_TAG = "text-generation"
CARD_TAGS = ("longspec", "speculative-decoding", "draft-model", "tree-speculation", "long-context")
CUSTOM_GENERATE_TAG = "custom_generate"  # how the Hub lists repos that carry a custom_generate/generate.py
NOT_MEASURED = "not measured"
REPO_ID_PLACEHOLDER = "<owner>/<draft-repo>"
# What `hf_longspec.corpus` reads for each text kind / source of a TrainRecipe.
TEXT_KIND_DESCRIPTIONS = {
    **SOURCE_DESCRIPTIONS,
    "code": "Python source files of the packages installed on the training machine",
    "prose": "package descriptions (dist-info METADATA) and license texts of that machine",
}


def render_card(
    draft_dir: str | Path,
    base_model: str,
    bench_json: str | Path | None = None,
    training_command: str | None = None,
    *,
    repo_id: str | None = None,
    license: str | None = None,
) -> ModelCard:
    """The model card of the draft in `draft_dir` for the target `base_model` (a Hub id).

    bench_json: measured results (format in `hf_longspec.publishing.measurements`); None = not measured.
    repo_id: where the draft will live; the usage snippets load it from there.
    """
    if not base_model or not isinstance(base_model, str):
        raise ValueError(
            f"base_model must be the target's Hub id (e.g. 'HuggingFaceTB/SmolLM2-135M-Instruct'), got {base_model!r}"
        )
    folder = Path(draft_dir)
    config = LongSpecDraftConfig.from_pretrained(str(folder))
    results = load_benchmark(bench_json)
    _check_measured_weights(folder, results, bench_json)
    has_custom_generate = (folder / "custom_generate" / "generate.py").is_file()
    card_data = ModelCardData(
        base_model=base_model,
        library_name=LIBRARY_NAME,
        pipeline_tag=PIPELINE_TAG,
        tags=list(CARD_TAGS) + ([CUSTOM_GENERATE_TAG] if has_custom_generate else []),
        license=license,
    )
    card = ModelCard.from_template(
        card_data,
        template_path=str(card_template_path()),
        base_model=base_model,
        repo_id=repo_id or REPO_ID_PLACEHOLDER,
        has_custom_generate=has_custom_generate,
        **_draft_facts(folder, config),
        **_training_facts(folder, training_command),
        **_measured_facts(results),
    )
    return ModelCard(re.sub(r"\n{3,}", "\n\n", card.content))  # optional template sections leave blank runs


def write_card(draft_dir: str | Path, base_model: str, bench_json=None, training_command=None, **options) -> Path:
    """Render the card (see `render_card`) and save it as README.md in the folder."""
    path = Path(draft_dir) / CARD_FILE
    render_card(draft_dir, base_model, bench_json, training_command, **options).save(path)
    return path


def _check_measured_weights(folder: Path, results: BenchmarkResults, bench_json) -> None:
    """Measurements that name the weights they measured must name this folder's."""
    measured = results.environment.get(DRAFT_WEIGHTS)
    if measured is None:
        return
    held = folder_weights_digest(folder)
    if measured != held:
        raise ValueError(
            f"{bench_json} measured the draft weights {measured}, but {folder} holds {held}: "
            "the card would describe other weights. Measure this folder's draft again (benchmarks/tau_curve.py, "
            "benchmarks/decode_bench.py, hf-longspec bench) or render the card for the folder that was measured."
        )


def _draft_facts(folder: Path, config: LongSpecDraftConfig) -> dict:
    tensors = draft_tensor_infos(folder)
    dtypes = sorted({info.dtype for info in tensors.values()})
    return {
        "parameters": _count(sum(info.numel for info in tensors.values())),
        "weight_dtypes": "/".join(dtypes) or "no weights",
        "target_model_type": config.target_model_type or "unknown",
        "target_num_hidden_layers": config.target_num_hidden_layers or "?",
        "target_layer_index": _layer_label(config),
        "sliding_window": config.sliding_window,
        "num_anchor_tokens": config.num_anchor_tokens,
        "tree_widths": " ".join(map(str, config.tree_widths)),
        "lookup_tokens": getattr(config, "lookup_tokens", 0) or "none",
        "cpu_round": _cpu_round(config),
    }


def _cpu_round(config: LongSpecDraftConfig) -> str:
    """The tree and chain a call on a CPU drafts (cpu_tree_widths, cpu_lookup_tokens), or "the same"."""
    widths, tokens = config.cpu_tree_widths, config.cpu_lookup_tokens
    if widths is None and tokens is None:
        return "the same tree and chain"
    tree = f"tree {' '.join(map(str, widths))}" if widths else "the same tree"
    chain = "the same chain" if tokens is None else f"a {tokens}-token chain" if tokens else "no chain"
    return f"{tree}, {chain}"


def _layer_label(config: LongSpecDraftConfig) -> str:
    """The target layer the cross-attention reads, and the extra ones it also reads (extra_target_layer_indices)."""
    index = config.target_layer_index
    label = str(index)
    if index < 0 and config.target_num_hidden_layers:
        label = f"{config.resolved_target_layer_index} ({'the last' if index == -1 else f'{index} from the end'})"
    if config.extra_target_layer_indices:
        label += ", and also " + ", ".join(str(config.resolve_layer(i)) for i in config.extra_target_layer_indices)
    return label


def _training_facts(folder: Path, training_command: str | None) -> dict:
    recipe = read_json(folder / RECIPE_FILE)
    return {
        "training_data": _training_data(recipe, read_json(folder / TRAINING_DATA_FILE)),
        "training_command": training_command,
        "recipe": [(_cell(name), _cell(json.dumps(value))) for name, value in recipe.items()] if recipe else [],
        "final_loss": _final_loss(read_json(folder / TRAINING_LOG_FILE)),
        "training_time": _training_time(read_json(folder / TRAINING_SPEED_FILE)),
    }


def _training_time(speed: dict | None) -> str | None:
    """The run's cost as its training_speed.json recorded it (only the run that wrote this folder:
    a draft continued from another one says so in its recipe's init_draft)."""
    if not speed or not speed.get("all_steps_seconds"):
        return None
    seconds, processes = speed["all_steps_seconds"], speed.get("world_size") or 1
    steps = speed.get("global_step") or speed.get("steps")
    parts = [f"{steps} steps in {seconds:.0f} s on {processes} process{'es' if processes > 1 else ''} "
             f"({seconds * processes / 3600:.2f} device-hours)"]
    if steps and speed.get("tokens_per_step"):
        parts.append(f"{steps * speed['tokens_per_step']:,} tokens")
    if speed.get("tokens_per_second"):
        parts.append(f"{speed['tokens_per_second']:,.0f} tokens/s after warm-up")
    memory = [m for m in speed.get("peak_gpu_memory_gib_per_rank") or [] if m]
    if memory:
        parts.append(f"peak GPU memory {max(memory):.1f} GiB per rank")
    return ", ".join(parts)


def _training_data(recipe: dict | None, read: dict | None = None) -> str:
    """What went in: the sources training read (training_data.json) when recorded, else the recipe's
    asked kinds or mix; plus the weights it started from."""
    if not recipe:
        return "not recorded."
    start = f" Training started from the trained draft `{recipe['init_draft']}`." if recipe.get("init_draft") else ""
    chunks = f" in {recipe['seq_len']}-token chunks" if recipe.get("seq_len") else ""
    if read:
        return f"local text only, nothing downloaded, {_sources_read(read)}{chunks}: {_shares_read(read)}.{start}"
    kinds = recipe.get("kinds") or []
    described = "; ".join(f"{kind}: {TEXT_KIND_DESCRIPTIONS.get(kind, kind)}" for kind in kinds) or "not recorded"
    if recipe.get("corpus_mix"):
        try:
            weights = parse_mix(recipe["corpus_mix"])
        except ValueError:
            weights = {}
        described = "; ".join(f"{name} {weight:.0%}: {TEXT_KIND_DESCRIPTIONS.get(name, name)}"
                              for name, weight in weights.items() if weight > 0) or "not recorded"
    limit = recipe.get("max_tokens")
    budget = f", at most {limit:,} tokens" if isinstance(limit, int) else ""
    return f"local text only, nothing downloaded ({described}){chunks}{budget}.{start}"


def _sources_read(read: dict) -> str:
    return f"{sum(int(source.get('tokens') or 0) for source in read.values()):,} tokens read"


def _shares_read(read: dict) -> str:
    """Per source, largest first: its share of what was read and what the mix asked of it."""
    parts = []
    for name, source in sorted(read.items(), key=lambda item: -(item[1].get("tokens") or 0)):
        asked = f"asked {source['weight']:.1%}" if source.get("weight") is not None else "asked ?"
        if not source.get("tokens"):
            parts.append(f"{name}: {asked}, none on the training machine")
            continue
        parts.append(f"{name} {source.get('share', 0):.1%} ({source['tokens']:,} tokens from "
                     f"{source.get('documents', '?'):,} documents; {asked}): "
                     f"{TEXT_KIND_DESCRIPTIONS.get(name, name)}")
    return "; ".join(parts)


def _final_loss(log) -> str | None:
    entries = [entry for entry in log or [] if isinstance(entry, dict) and "loss" in entry]
    if not entries:
        return None
    last = entries[-1]
    step = f" at step {last['step']}" if "step" in last else ""
    return f"{float(last['loss']):.4f}{step}"


def _measured_facts(results: BenchmarkResults) -> dict:
    return {
        "measured_summary": _summary(results),
        "runs": [_run_row(run) for run in results.runs],
        "environment": ", ".join(f"{name} {value}" for name, value in results.environment.items()),
        "bench_notes": list(results.notes),
    }


def _summary(results: BenchmarkResults) -> list[str]:
    """One line per LongSpec variant measured: its tau and speedup ranges over the settings."""
    methods = results.longspec_methods or (None,)
    baselines = list(dict.fromkeys(run.method for run in results.runs if run.is_baseline and run.method))
    # the baseline the rows name (vanilla static, compiled, on the shipped card), where they name one
    baseline = baselines[0] if len(baselines) == 1 and baselines[0] != "vanilla" else "vanilla `generate()`"
    lines = []
    for method in methods:
        tau = results.longspec_range("tau", method) if method else None
        speedup = results.longspec_range("speedup", method) if method else None
        lines.append(
            f"{method or 'LongSpec'}: τ (mean tokens per target forward) {_span(tau) if tau else NOT_MEASURED}; "
            f"speedup over {baseline} {f'{_span(speedup)}x' if speedup else NOT_MEASURED}."
        )
    return lines


def _run_row(run: BenchmarkRun) -> dict:
    return {
        "task": _cell(run.task) if run.task else NOT_MEASURED,
        "prompt_tokens": run.prompt_tokens if run.prompt_tokens is not None else NOT_MEASURED,
        "new_tokens": run.new_tokens if run.new_tokens is not None else NOT_MEASURED,
        "method": _cell(run.method) if run.method else "unnamed",
        "tau": _number(run.tau),
        "tokens_per_second": _number(run.tokens_per_second, 1),
        "speedup": f"{_number(run.speedup)}x" if run.speedup is not None else NOT_MEASURED,
        "identical": _identical(run.exact_match),
    }


def _identical(exact_match: float | None) -> str:
    if exact_match is None:
        return NOT_MEASURED
    return "yes" if exact_match == 1.0 else f"{exact_match:.0%} of prompts"


def _cell(text: str) -> str:
    """Text that cannot break a markdown table row."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def _number(value: float | None, digits: int = 2) -> str:
    return NOT_MEASURED if value is None else f"{value:.{digits}f}"


def _span(bounds: tuple[float, float]) -> str:
    low, high = bounds
    return _number(low) if f"{low:.2f}" == f"{high:.2f}" else f"{_number(low)}-{_number(high)}"


def _count(parameters: int) -> str:
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if parameters >= size:
            return f"{parameters / size:.1f}{suffix}"
    return str(parameters)
