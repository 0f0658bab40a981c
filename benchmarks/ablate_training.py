"""A training ablation with seeds: each variant of a base recipe, trained once per seed from the same
start, then held-out tau of every run on the same eval-split prompts.

    PYTHONPATH=src python benchmarks/ablate_training.py --out $OUT/ablation --init-draft embedded \
        --steps 200 --seeds 0 1 --corpus-mix chat --chat-data /tmp/chat/chat_train.jsonl \
        --variant base --variant "rollout2=rollout_steps:2" --variant "seq4k=seq_len:4096,batch_size:8"
    PYTHONPATH=src python benchmarks/ablate_training.py --out /tmp/ablation --quick     # CPU smoke run
    python benchmarks/ablate_training.py --merge call1/ablation.json call2/ablation.json --out merged

Why: the draft-quality issue asks that every training claim rest on an ablation with two seeds or
more. One seed cannot separate differences of ~0.2 tau (docs/training.md), so this script reports,
per variant, the mean over seeds, the spread between seeds and the paired per-prompt difference
against the first variant (same prompts, same seed), and draws both.

A variant is NAME=field:value,field:value over the TrainRecipe fields (values parsed as JSON when
they parse: 2, 4096, true, "argmax", {"chat": 1.0}, ["records.jsonl"]; commas inside brackets stay
in their value); "base" alone is the base recipe. The seed changes the training
(data order, noise shifts, and the initial weights of an untrained draft); the token chunks of one
data setting are built once, from seed 0, and shared by all its runs (a longer seq_len is regrouped
from the chunks of a shorter one: the same tokens, not tokenized again).

Every run records tau per (kind, length) cell too, pooled over the cell's prompts, and the summary
the mean over seeds per cell: whether a variant keeps tau flat from 2k to 8k is a per-kind question
that the pooled tau hides. `--merge` joins the ablation.json files of separate calls (the same
variants and prompts, other seeds) into one report: two seeds of a whole run do not fit one call.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from dataclasses import asdict, fields, replace
from pathlib import Path

import torch

from hf_longspec.bench.machine import machine_info
from hf_longspec.embedded import load_embedded_target
from hf_longspec.evaluation import (held_out_prompts, known_digests, measure_tau, paired_difference, prompt_digest,
                                    same_prompts, seed_averaged_deltas, suffix_ids)
from hf_longspec.publishing.weights_digest import model_weights_digest
from hf_longspec.training.run import TrainRecipe, build_dataset, initial_draft, train_draft

# the recipe fields that decide the token chunks: runs that agree on them share one dataset (seq_len
# aside: a multiple of a built seq_len is regrouped from it, see `regrouped`)
DATA_FIELDS = ("seq_len", "max_tokens", "kinds", "corpus_mix", "chat_data", "corpus_max_epochs", "chat_windows")


def parse_variant(text: str) -> tuple[str, dict]:
    """'rollout2=rollout_steps:2,rollout_decay:0.5' -> ('rollout2', {...}); 'base' -> ('base', {})."""
    name, _, body = text.partition("=")
    if not name:
        raise ValueError(f"a variant needs a name: {text!r} (NAME or NAME=field:value,...)")
    known = {f.name for f in fields(TrainRecipe)} - {"output_dir", "seed"}
    overrides = {}
    for item in filter(None, _top_level_items(body)):
        key, sep, value = item.partition(":")
        if not sep or key not in known:
            raise ValueError(f"variant {name!r}: {item!r} is not field:value over a TrainRecipe field; "
                             f"allowed fields: {', '.join(sorted(known))}")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return name, overrides


def _top_level_items(body: str) -> list[str]:
    """'a:1,b:{"x":1,"y":2}' -> ['a:1', 'b:{"x":1,"y":2}']: commas inside JSON brackets or strings do
    not split (a corpus_mix dict or a chat_data list as one value)."""
    items, depth, quoted, start = [], 0, False, 0
    for at, char in enumerate(body):
        if char == '"' and (at == 0 or body[at - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "[{":
            depth += 1
        elif not quoted and char in "]}":
            depth -= 1
        elif not quoted and depth == 0 and char == ",":
            items.append(body[start:at])
            start = at + 1
    return items + [body[start:]]


def summarize(runs: list[dict]) -> list[dict]:
    """Per variant: tau mean over seeds, min and max, and the mean paired per-prompt difference
    against the first variant's run of the same seed."""
    names = list(dict.fromkeys(run["variant"] for run in runs))
    reference = {run["seed"]: run for run in runs if run["variant"] == names[0]}
    rows = []
    for name in names:
        mine = [run for run in runs if run["variant"] == name]
        taus = [run["tau"] for run in mine]
        paired = [mine_tau - ref_tau for run in mine if run["seed"] in reference
                  for mine_tau, ref_tau in zip(run["tau_per_prompt"], reference[run["seed"]]["tau_per_prompt"])]
        rows.append({"variant": name, "seeds": [run["seed"] for run in mine], "tau_mean": statistics.mean(taus),
                     "tau_min": min(taus), "tau_max": max(taus),
                     "paired_delta_mean": statistics.mean(paired) if paired else None,
                     "prompts_better": sum(d > 0 for d in paired), "prompts_worse": sum(d < 0 for d in paired),
                     **cell_summary(mine)})
    return rows


def cell_taus(rows: list[dict]) -> dict:
    """{kind: {length: tau}} of measure_tau's per-prompt rows, tokens over rounds pooled per cell: the
    numbers that say whether tau holds from 2k to 8k per kind (JSON keys, so lengths are strings)."""
    pooled: dict = {}
    for row in rows:
        cells = pooled.setdefault(row["kind"], {})
        emitted, rounds = cells.get(str(row["length"]), (0, 0))
        cells[str(row["length"])] = (emitted + row["emitted_tokens"], rounds + row["rounds"])
    return {kind: {length: emitted / max(rounds, 1) for length, (emitted, rounds) in cells.items()}
            for kind, cells in pooled.items()}


def cell_summary(runs: list[dict]) -> dict:
    """Per kind and length the mean over the runs (seeds) of their cell tau, and per kind the longest
    length's mean over the shortest's; empty for runs measured before cells were recorded."""
    values: dict = {}
    for run in runs:
        for kind, cells in run.get("tau_per_cell", {}).items():
            for length, tau in cells.items():
                values.setdefault(kind, {}).setdefault(length, []).append(tau)
    if not values:
        return {}
    means = {kind: {length: statistics.mean(cells[length]) for length in sorted(cells, key=int)}
             for kind, cells in values.items()}
    ratios = {}
    for kind, cells in means.items():
        taus = list(cells.values())
        ratios[kind] = taus[-1] / taus[0] if taus[0] else None
    return {"tau_per_cell": means, "longest_over_shortest": ratios}


def table(rows: list[dict]) -> str:
    lines = ["| variant | seeds | tau mean | tau min-max | paired delta vs first | prompts better / worse |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        delta = "-" if row["paired_delta_mean"] is None else f"{row['paired_delta_mean']:+.3f}"
        lines.append(f"| {row['variant']} | {len(row['seeds'])} | {row['tau_mean']:.3f} | {row['tau_min']:.2f}-"
                     f"{row['tau_max']:.2f} | {delta} | {row['prompts_better']} / {row['prompts_worse']} |")
    return "\n".join(lines)


def cell_table(rows: list[dict]) -> str:
    """tau per kind and length, mean over seeds, and the longest length's over the shortest's."""
    lengths = sorted({int(length) for row in rows for cells in row.get("tau_per_cell", {}).values()
                      for length in cells})
    if not lengths:
        return ""
    lines = [f"| variant | kind | {' | '.join(map(str, lengths))} | {lengths[-1]} / {lengths[0]} |",
             "|---|---|" + "---|" * (len(lengths) + 1)]
    for row in rows:
        for kind, cells in row.get("tau_per_cell", {}).items():
            taus = " | ".join(f"{cells[str(length)]:.2f}" if str(length) in cells else "-" for length in lengths)
            ratio = row["longest_over_shortest"].get(kind)
            lines.append(f"| {row['variant']} | {kind} | {taus} | {'-' if ratio is None else f'{ratio:.2f}x'} |")
    return "\n".join(lines)


def plot(report: dict, path: Path) -> None:
    """Loss against steps per run, tau per variant with every seed's point, and (when recorded) tau
    against prompt length per variant and kind, mean over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = any(row.get("tau_per_cell") for row in report["summary"])
    fig, axes = plt.subplots(1, 3 if cells else 2, figsize=(19 if cells else 13, 4.5))
    loss_ax, tau_ax = axes[:2]
    names = [row["variant"] for row in report["summary"]]
    for run in report["runs"]:
        if run["loss"]:
            steps, values = zip(*run["loss"])
            loss_ax.plot(steps, values, label=f"{run['variant']} seed {run['seed']}",
                         color=f"C{names.index(run['variant'])}", alpha=0.6 + 0.4 * (run["seed"] == 0))
    loss_ax.set(xlabel="optimizer step", ylabel="training loss", title="loss against steps")
    loss_ax.legend(fontsize=7)
    for index, row in enumerate(report["summary"]):
        taus = [run["tau"] for run in report["runs"] if run["variant"] == row["variant"]]
        tau_ax.scatter(taus, [index] * len(taus), color=f"C{index}")
        tau_ax.plot([row["tau_mean"]] * 2, [index - 0.3, index + 0.3], color=f"C{index}")
    if "start" in report:
        tau_ax.axvline(report["start"]["tau"], color="grey", linestyle="--", label="start (no training)")
        tau_ax.legend(fontsize=7)
    tau_ax.set_yticks(range(len(names)), names)
    measured = "the tree alone" if report["settings"].get("lookup_tokens") == 0 else "the draft's default"
    tau_ax.set(xlabel=f"held-out tau (greedy, {measured}); dots: seeds, bar: mean", title="acceptance")
    if cells:
        styles = ["-", "--", ":", "-."]
        kinds = list(dict.fromkeys(kind for row in report["summary"] for kind in row.get("tau_per_cell", {})))
        for kind, by_length in report.get("start", {}).get("tau_per_cell", {}).items():
            lengths = sorted(by_length, key=int)
            axes[2].plot([int(length) for length in lengths], [by_length[length] for length in lengths], marker="o",
                         color="grey", linestyle=styles[kinds.index(kind) % len(styles)] if kind in kinds else "-",
                         label=f"start {kind}")
        for index, row in enumerate(report["summary"]):
            for kind, by_length in row.get("tau_per_cell", {}).items():
                axes[2].plot([int(length) for length in by_length], list(by_length.values()), marker="o",
                             color=f"C{index}", linestyle=styles[kinds.index(kind) % len(styles)],
                             label=f"{row['variant']} {kind}")
        axes[2].set(xlabel="prompt length (tokens)", ylabel="tau, mean over seeds", title="tau against context")
        axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def against_start(runs: list[dict], start: dict) -> list[dict]:
    """Per variant the mean paired per-prompt difference against the starting draft (the same prompts),
    and on how many prompt-seed pairs it is better or worse: did the training help at all?"""
    rows = []
    for name in dict.fromkeys(run["variant"] for run in runs):
        mine = [run for run in runs if run["variant"] == name]
        pairs = paired_difference([tau - theirs for run in mine
                                   for tau, theirs in zip(run["tau_per_prompt"], start["tau_per_prompt"])])
        # the standard error over prompts, each prompt's difference averaged over the seeds first
        per_prompt = paired_difference(seed_averaged_deltas({run["seed"]: run["tau_per_prompt"] for run in mine},
                                                            {run["seed"]: start["tau_per_prompt"] for run in mine}))
        rows.append({"variant": name, "paired_delta_mean": pairs["mean"], "paired_delta_stderr": per_prompt["stderr"],
                     "prompts_better": pairs["better"], "prompts_worse": pairs["worse"]})
    return rows


def start_table(report: dict) -> str:
    start = report["start"]
    lines = [f"| against the start ({start['draft']}, tau {start['tau']:.3f}) | paired delta | prompt-seed pairs better / worse |",
             "|---|---|---|"]
    lines += [f"| {row['variant']} | {row['paired_delta_mean']:+.3f}"
              + (f" ± {row['paired_delta_stderr']:.3f}" if "paired_delta_stderr" in row else "")
              + f" | {row['prompts_better']} / {row['prompts_worse']} |"
              for row in report.get("against_start", [])]
    return "\n".join(lines)


def write_report(report: dict, out: Path, started: float | None) -> None:
    """ablation.json with the runs so far and their summary (a merged report keeps its calls' seconds)."""
    report["summary"] = summarize(report["runs"])
    if "start" in report:
        report["against_start"] = against_start(report["runs"], report["start"])
    if started is not None:
        report["seconds"] = time.perf_counter() - started
    (out / "ablation.json").write_text(json.dumps(report, indent=2))


def merge_reports(paths: list[str]) -> dict:
    """One report from the ablation.json files of separate calls: the same settings and eval prompts,
    other seeds (a whole-run pair of seeds does not fit one call) or variants added in a later call
    (paired with the first file's first variant, as in one call). Refused when they measured something
    else, when a variant name means other overrides, or when a (variant, seed) run repeats, since the
    pairing would then be wrong."""
    reports = [json.loads(Path(path).read_text()) for path in paths]
    first = reports[0]

    def comparable(report):
        # --eval-start runs in one call only: the starting draft is the same for every seed
        return {key: value for key, value in report["settings"].items()
                if key not in ("seeds", "out", "merge", "eval_start", "variants", "variant")}

    variants = dict(first["settings"]["variants"])
    prompts = first["prompts"]  # with every digest the files recorded, so far
    for path, report in zip(paths[1:], reports[1:]):
        if not same_prompts(report["prompts"], prompts):
            raise ValueError(f"{path} measured other eval prompts than {paths[0]}; the runs pair prompt by prompt")
        prompts = known_digests(prompts, report["prompts"])
        mine, theirs = comparable(report), comparable(first)
        differ = sorted(key for key in {*mine, *theirs} if mine.get(key) != theirs.get(key))
        differ += sorted(f"variants ({name})" for name, overrides in report["settings"]["variants"].items()
                         if variants.get(name, overrides) != overrides)
        if differ:
            raise ValueError(f"{path} differs from {paths[0]} in {', '.join(differ)}: not one ablation")
        variants.update(report["settings"]["variants"])
    runs = [run for report in reports for run in report["runs"]]
    keys = [(run["variant"], run["seed"]) for run in runs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"runs repeat across the files: {repeated}; merge calls of different seeds")
    order = list(variants)
    runs.sort(key=lambda run: (run["seed"], order.index(run["variant"])))  # seed-major, first variant first
    starts = [report["start"] for report in reports if "start" in report]
    merged_start = {"start": starts[0]} if starts else {}
    return {**merged_start, "machine": first["machine"], "machines": [report["machine"] for report in reports],
            "settings": {**first["settings"], "seeds": sorted({run["seed"] for run in runs}),
                         "variants": variants, "merge": list(paths)},
            "prompts": prompts, "runs": runs, "merged_from": [str(path) for path in paths],
            "seconds": sum(report.get("seconds", 0.0) for report in reports)}


def regrouped(dataset, seq_len: int):
    """The dataset that building `dataset`'s data at `seq_len` gives, made from its chunks: each source's
    chunks are the first tokens of its stream in order, so runs of seq_len // dataset.seq_len of them
    (a source's odd ones at its end dropped) are exactly those chunks, without tokenizing the 40M
    tokens again (about a minute of a GPU call). None where that does not hold: seq_len not a multiple,
    chat records cut at their ends, or no whole chunk left."""
    factor, rest = divmod(seq_len, dataset.seq_len)
    if rest or factor < 2 or dataset.chat_windows != "stream":
        return None
    chunks, masks, sources = [], [], []
    for index in range(len(dataset.source_names)):
        rows = dataset.chunk_sources == index
        mine = dataset.chunks[rows]
        count = len(mine) // factor
        chunks.append(mine[:count * factor].reshape(count, seq_len))
        if dataset.prompt_mask is not None:
            masks.append(dataset.prompt_mask[rows][:count * factor].reshape(count, seq_len))
        sources.append(torch.full((count,), index, dtype=torch.long))
    longer = copy.copy(dataset)
    longer.seq_len, longer.chunks, longer.chunk_sources = seq_len, torch.cat(chunks), torch.cat(sources)
    longer.prompt_mask = torch.cat(masks) if masks else None
    if not len(longer.chunks):
        return None
    if dataset.mix_report:
        report = {}
        for index, (name, row) in enumerate(dataset.mix_report.items()):
            tokens = int((longer.chunk_sources == index).sum()) * seq_len
            epochs = row["epochs"]
            if epochs is not None and row["tokens"]:
                epochs *= tokens / row["tokens"]
            report[name] = {**row, "tokens": tokens, "epochs": epochs}
        total = sum(row["tokens"] for row in report.values())
        longer.mix_report = {name: {**row, "share": row["tokens"] / total} for name, row in report.items()}
    return longer


def dataset_for(datasets: dict, tokenizer, recipe: TrainRecipe):
    """The token chunks of `recipe`'s data setting: built once (from seed 0) and shared by its runs, and
    at a longer seq_len regrouped from one already built where `regrouped` allows."""
    key = json.dumps({f: getattr(recipe, f) for f in DATA_FIELDS if f != "seq_len"}, sort_keys=True)
    built = datasets.setdefault(key, {})
    if recipe.seq_len not in built:
        found = (regrouped(built[have], recipe.seq_len) for have in sorted(built))
        built[recipe.seq_len] = next(filter(None, found), None) or build_dataset(tokenizer,
                                                                                 replace(recipe, seed=0))
    return built[recipe.seq_len]


def eval_prompts(tokenizer, lengths, kinds, per_cell: int, device) -> list:
    """(kind, length, ids) per kind in order: held_out_prompts for the corpus kinds, and for 'chat'
    benchmarks/tau_curve.py's prompts (an eval-split document inside a user turn, in the chat template);
    the shorter prompts of each are suffixes of its longest (since the ninth session)."""
    prompts = []
    for kind in kinds:
        if kind != "chat":
            prompts += held_out_prompts(tokenizer, lengths=tuple(lengths), kinds=(kind,), per_cell=per_cell,
                                        device=device)
            continue
        sys.path.insert(0, str(Path(__file__).parent))
        from tau_curve import chat_parts

        for index in range(per_cell):  # every length a suffix of the longest, its template kept whole
            _, head, document, tail = chat_parts(tokenizer, max(lengths), index)
            prompts += [("chat", length, torch.tensor([suffix_ids(head + document + tail, length, len(head), len(tail))],
                                                      device=device)) for length in lengths]
    return prompts


def held_out_tau(target, draft, prompts, new_tokens: int, generate_kwargs: dict) -> dict:
    """tau of `draft` on the ablation's prompts, pooled, per prompt and per cell, and its seconds.
    Uncompiled rounds: tau does not depend on compiling, and each new draft would compile anew."""
    begin = time.perf_counter()
    tau = measure_tau(target, draft, prompts, max_new_tokens=new_tokens, longspec_compile=False,
                      **generate_kwargs)
    return {"tau": tau["tau"], "tau_per_prompt": [row["tau"] for row in tau["per_prompt"]],
            "tau_per_cell": cell_taus(tau["per_prompt"]), "weights_digest": model_weights_digest(draft),
            "eval_seconds": time.perf_counter() - begin}


def measure_start(target, recipe: TrainRecipe, args, prompts, generate_kwargs: dict) -> dict:
    """tau of the starting draft (--init-draft) on the ablation's prompts: the row every variant must
    beat for its training to have helped, and the draft a fine-tune would replace."""
    draft = initial_draft(target, recipe).to(device=target.device, dtype=target.dtype).eval().bind(target)
    start = {"draft": args.init_draft, **held_out_tau(target, draft, prompts, args.new_tokens, generate_kwargs)}
    print(f"start ({args.init_draft}): tau {start['tau']:.3f}", flush=True)
    return start


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder: ablation.json, ablation.png, runs/")
    parser.add_argument("--merge", nargs="+", metavar="JSON", default=None,
                        help="no training: join the ablation.json files of separate calls (other seeds) in --out")
    parser.add_argument("--init-draft", default="embedded", help="'embedded', a draft folder, or 'untrained'")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--variant", action="append", default=[], help="NAME or NAME=field:value,... (repeatable)")
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=10_000_000)
    parser.add_argument("--corpus-mix", default=None)
    parser.add_argument("--chat-data", nargs="*", default=[])
    parser.add_argument("--corpus-max-epochs", type=float, default=1.0,
                        help="passes over a source smaller than its share (2: the shipped draft's last stage)")
    parser.add_argument("--eval-lengths", type=int, nargs="+", default=[2048, 4096, 8000])
    parser.add_argument("--eval-kinds", nargs="+", default=["code", "prose"], help="corpus kinds, and 'chat'")
    parser.add_argument("--eval-prompts", type=int, default=2, help="prompts per (kind, length)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--lookup-tokens", type=int, default=None,
                        help="prompt-lookup chain while measuring tau (longspec_lookup_tokens; default: each draft's "
                             "config; 0: the tree alone, whose tau the training moves and the chain's copies do not)")
    parser.add_argument("--eval-start", action="store_true",
                        help="also measure the starting draft (--init-draft) on the same prompts: did training help?")
    parser.add_argument("--eval-only", action="store_true",
                        help="measure --init-draft on the prompts (as --eval-start) and train nothing: a draft "
                             "trained elsewhere (the long run), prompt by prompt comparable with the ablations")
    parser.add_argument("--quick", action="store_true", help="tiny CPU smoke run: 2 steps, one short prompt")
    args = parser.parse_args(argv)
    if args.eval_only and (args.variant or args.merge):
        parser.error("--eval-only trains nothing and joins no reports: it takes no --variant or --merge")
    args.eval_start = args.eval_start or args.eval_only
    if args.eval_start and args.init_draft == "untrained":
        parser.error("--eval-start and --eval-only measure the starting draft: they need a trained --init-draft "
                     "('embedded' or a draft folder), not 'untrained'")
    if args.quick:
        args.steps, args.seq_len, args.batch_size, args.max_tokens, args.warmup_steps = 2, 64, 2, 4_000, 0
        args.eval_lengths, args.eval_kinds, args.eval_prompts, args.new_tokens = [200], ["code"], 1, 6
        args.seeds = args.seeds[:2]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.merge:
        return merge(args.merge, Path(args.out))
    variants = [] if args.eval_only else [parse_variant(text) for text in (args.variant or ["base"])]
    if len({name for name, _ in variants}) < len(variants):
        raise ValueError(f"variant names repeat: {[name for name, _ in variants]}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    target, tokenizer = load_embedded_target()
    prompts = eval_prompts(tokenizer, args.eval_lengths, args.eval_kinds, args.eval_prompts, target.device)
    base = TrainRecipe(output_dir="", max_steps=args.steps, seq_len=args.seq_len, batch_size=args.batch_size,
                       learning_rate=args.lr, warmup_steps=args.warmup_steps, max_tokens=args.max_tokens,
                       corpus_mix=args.corpus_mix, chat_data=list(args.chat_data), save_steps=10**9,
                       corpus_max_epochs=args.corpus_max_epochs,
                       logging_steps=max(1, args.steps // 20), overwrite_output=True,
                       init_draft=None if args.init_draft == "untrained" else args.init_draft)
    report = {"machine": machine_info(target.device), "settings": {**vars(args), "variants": dict(variants)},
              "prompts": [{"kind": kind, "length": length, "digest": prompt_digest(ids)} for kind, length, ids in prompts],
              "runs": []}
    generate_kwargs = {} if args.lookup_tokens is None else {"longspec_lookup_tokens": args.lookup_tokens}
    if args.eval_start:
        report["start"] = measure_start(target, base, args, prompts, generate_kwargs)
        write_report(report, out, started)
    if args.eval_only:
        print("\ntau per kind and prompt length\n" + cell_table([{"variant": args.init_draft,
                                                                   **cell_summary([report["start"]])}]))
        return 0
    datasets = {}
    # seed by seed, each seed's variants together, and the report rewritten after every run: a run cut
    # short by a time limit keeps complete pairs
    for seed in args.seeds:
        for name, overrides in variants:
            if "kinds" in overrides and "corpus_mix" not in overrides:
                overrides = {**overrides, "corpus_mix": None}  # kinds name the text only without a mix
            recipe = replace(base, output_dir=str(out / "runs" / f"{name}-seed{seed}"), seed=seed, **overrides)
            begin = time.perf_counter()
            dataset = dataset_for(datasets, tokenizer, recipe)
            data_seconds = time.perf_counter() - begin
            begin = time.perf_counter()
            draft = train_draft(target, tokenizer, recipe, dataset=dataset, progress=False)
            train_seconds = time.perf_counter() - begin
            draft.to(target.dtype).eval().bind(target)
            tau = held_out_tau(target, draft, prompts, args.new_tokens, generate_kwargs)
            final = Path(recipe.output_dir) / "final"
            log = json.loads((final / "training_log.json").read_text())
            speed = json.loads((final / "training_speed.json").read_text())
            report["runs"].append({
                "variant": name, "seed": seed, "recipe": asdict(recipe), "train_seconds": train_seconds,
                "data_seconds": data_seconds, "tokens_per_second": speed.get("tokens_per_second"),
                "lookup_tokens": (getattr(draft.config, "lookup_tokens", 0) if args.lookup_tokens is None
                                  else args.lookup_tokens),  # 0: the draft's tree alone
                **tau, "training_data": dataset.mix_report,
                "loss": [(entry["step"], entry["loss"]) for entry in log if "loss" in entry],
            })
            print(f"{name} seed {seed}: tau {tau['tau']:.3f} ({data_seconds:.0f} s of data, "
                  f"{train_seconds:.0f} s of training, {tau['eval_seconds']:.0f} s of tau)", flush=True)
            del draft
            if target.device.type == "cuda":
                torch.cuda.empty_cache()
            write_report(report, out, started)
    finish(report, out)
    return 0


def finish(report: dict, out: Path) -> None:
    """The plot and the tables of a written report."""
    try:
        plot(report, out / "ablation.png")
    except ImportError:  # matplotlib is the [bench] extra
        print("matplotlib missing: no plot")
    print("\n" + table(report["summary"]))
    if "start" in report:
        print("\n" + start_table(report))
    cells = cell_table(([{"variant": "start", **cell_summary([report["start"]])}] if "start" in report else [])
                       + report["summary"])
    if cells:
        print("\ntau per kind and prompt length, mean over seeds\n" + cells)


def merge(paths: list[str], out: Path) -> int:
    """--merge: the joined report, summarized and drawn again."""
    report = merge_reports(paths)
    out.mkdir(parents=True, exist_ok=True)
    write_report(report, out, None)
    finish(report, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
