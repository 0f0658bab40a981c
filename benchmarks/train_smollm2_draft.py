"""Train the shipped SmolLM2-135M-Instruct draft on one GPU, then the training ablation.

    PYTHONPATH=src python benchmarks/train_smollm2_draft.py --out $OUT --budget-seconds 240

1. main run: anchor-offset + noisy training + target-argmax distillation (the defaults), for as
   many steps as fit in --budget-seconds (measured by a short probe run first);
2. ablation: {anchor-offset on, off} x {noisy on, off}, plus distillation off, each for
   --ablation-steps steps from the same seed and data;
3. tau of every draft on held-out 2k-8k code and prose prompts (greedy, default tree, no prompt-lookup
   chain: the draft's own acceptance, whatever lookup_tokens its config sets).
Writes OUT/draft/ (Hub-ready folder) and OUT/training_ablation.json; prints a table last.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path

import torch
import transformers
from transformers import TrainerCallback

from hf_longspec import load_embedded_target
from hf_longspec.evaluation import held_out_prompts, measure_tau
from hf_longspec.training.run import TrainRecipe, build_dataset, train_draft

ABLATION = [
    ("ao+noisy+distill", dict(anchor_offset=True, noisy=True, distill="argmax")),
    ("noisy+distill (no AO)", dict(anchor_offset=False, noisy=True, distill="argmax")),
    ("ao+distill (no noisy)", dict(anchor_offset=True, noisy=False, distill="argmax")),
    ("distill only", dict(anchor_offset=False, noisy=False, distill="argmax")),
    ("ao+noisy, text labels", dict(anchor_offset=True, noisy=True, distill="none")),
]


class StepTimer(TrainerCallback):
    def __init__(self):
        self.times = []

    def on_step_end(self, args, state, control, **kwargs):
        self.times.append(time.perf_counter())


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default=None, help="scratch folder for checkpoints (default: OUT/work)")
    parser.add_argument("--budget-seconds", type=float, default=240.0)
    parser.add_argument("--ablation-steps", type=int, default=250)
    parser.add_argument("--seq-len", type=int, default=2048)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--max-tokens", type=int, default=40_000_000)
    parser.add_argument("--eval-lengths", default="2048,4096,8000")
    parser.add_argument("--eval-new-tokens", type=int, default=64)
    parser.add_argument("--corpus-mix", default=None,
                        help="training text mix (hf_longspec.corpus.MIX_PRESETS or code=0.4,docs=0.3,...; default wide)")
    parser.add_argument("--kinds", default=None,
                        help="the original loader instead of a mix, e.g. code,prose (the shipped draft's data)")
    parser.add_argument("--chat-data", nargs="*", default=[], help="jsonl files of benchmarks/make_chat_data.py")
    parser.add_argument("--eval-kinds", default="code,prose",
                        help="held-out prompt kinds for tau, e.g. code,prose,docs,man,changelog,multilingual")
    parser.add_argument("--skip-ablation", action="store_true")
    parser.add_argument("--quick", action="store_true", help="tiny CPU smoke run of the whole script")
    return parser.parse_args()


def main():
    args = parse_args()
    if args.quick:
        args.budget_seconds, args.ablation_steps, args.seq_len, args.batch_size = 5, 3, 128, 2
        args.max_tokens, args.eval_lengths, args.eval_new_tokens = 20_000, "300", 8
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work) if args.work else out / "work"
    started = time.perf_counter()
    target, tokenizer = load_embedded_target()
    device = target.device
    base = dict(seq_len=args.seq_len, batch_size=args.batch_size, learning_rate=args.lr, max_tokens=args.max_tokens,
                logging_steps=10, save_steps=10**9, warmup_steps=20, corpus_mix=args.corpus_mix,
                kinds=args.kinds.split(",") if args.kinds else None, chat_data=list(args.chat_data))
    dataset = build_dataset(tokenizer, TrainRecipe(output_dir=str(work / "tmp"), **base))
    print(f"dataset: {len(dataset)} chunks of {args.seq_len} tokens ({time.perf_counter() - started:.0f} s)", flush=True)
    lengths = tuple(int(x) for x in args.eval_lengths.split(","))
    prompts = held_out_prompts(tokenizer, lengths=lengths, kinds=tuple(args.eval_kinds.split(",")), device=device)
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "machine": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "command": "PYTHONPATH=src python benchmarks/train_smollm2_draft.py " + " ".join(
            f"--{k.replace('_', '-')}" + ("" if isinstance(v, bool) else " " + " ".join(map(str, v))
                                          if isinstance(v, list) else f" {v}")
            for k, v in vars(args).items()
            if k not in ("out", "work", "quick") and v is not False and v is not None and v != []),
        "dataset_chunks": len(dataset),
        "dataset_mix": dataset.mix_report,
        "eval_prompts": [{"kind": k, "length": n} for k, n, _ in prompts],
    }

    def save_report():
        (out / "training_ablation.json").write_text(json.dumps(report, indent=2))

    # 1. probe the step time, then the main run sized to the budget
    timer = StepTimer()
    probe = TrainRecipe(output_dir=str(work / "probe"), max_steps=25, overwrite_output=True, **base)
    train_draft(target, tokenizer, probe, dataset=dataset, callbacks=[timer], progress=False)
    step_seconds = (timer.times[-1] - timer.times[4]) / (len(timer.times) - 5) if len(timer.times) > 6 else 1.0
    main_steps = max(int(args.budget_seconds / step_seconds), 10)
    report["step_seconds"] = step_seconds
    print(f"step time {step_seconds * 1000:.0f} ms -> main run {main_steps} steps", flush=True)

    recipe = TrainRecipe(output_dir=str(work / "main_run"), max_steps=main_steps, overwrite_output=True, **base)
    t0 = time.perf_counter()
    draft = train_draft(target, tokenizer, recipe, dataset=dataset)
    train_seconds = time.perf_counter() - t0
    final = work / "main_run" / "final"
    draft_dir = out / "draft"
    draft_dir.mkdir(exist_ok=True)
    draft.to(torch.bfloat16).save_pretrained(draft_dir)  # shipped in bf16: 4M params, ~9 MB
    for name in ("training_recipe.json", "training_log.json"):
        (draft_dir / name).write_text((final / name).read_text())
    draft.to(target.dtype).eval().bind(target)
    t0 = time.perf_counter()
    tau = measure_tau(target, draft, prompts, max_new_tokens=args.eval_new_tokens, longspec_lookup_tokens=0)
    report["main"] = {
        "recipe": asdict(recipe), "steps": main_steps, "train_seconds": train_seconds,
        "tokens_seen": main_steps * args.batch_size * args.seq_len, "tau": tau,
        "eval_seconds": time.perf_counter() - t0,
        "loss": [(e["step"], e["loss"]) for e in json.loads((final / "training_log.json").read_text()) if "loss" in e],
    }
    save_report()
    print(f"main draft: tau {tau['tau']:.2f} after {main_steps} steps ({train_seconds:.0f} s)", flush=True)

    # 2. ablation, same seed and data, shorter runs
    report["ablation"] = []
    if not args.skip_ablation:
        for name, switches in ABLATION:
            recipe = TrainRecipe(output_dir=str(work / "ablation"), max_steps=args.ablation_steps,
                                 overwrite_output=True, **base, **switches)
            draft = train_draft(target, tokenizer, recipe, dataset=dataset, progress=False)
            log = json.loads((work / "ablation" / "final" / "training_log.json").read_text())
            draft.to(target.dtype).eval().bind(target)
            tau = measure_tau(target, draft, prompts, max_new_tokens=args.eval_new_tokens, longspec_lookup_tokens=0)
            report["ablation"].append({
                "name": name, **switches, "steps": args.ablation_steps, "tau": tau["tau"],
                "tau_per_prompt": [(r["kind"], r["length"], r["tau"]) for r in tau["per_prompt"]],
                "loss": [(e["step"], e["loss"]) for e in log if "loss" in e],
            })
            save_report()
            print(f"{name}: tau {tau['tau']:.2f}", flush=True)

    print("\n| run | steps | final loss | tau (held-out 2k-8k, greedy, default tree alone) |")
    print("|---|---|---|---|")
    rows = [("main (defaults)", report["main"])] + [(a["name"], a) for a in report["ablation"]]
    for name, row in rows:
        tau_value = row["tau"]["tau"] if isinstance(row["tau"], dict) else row["tau"]
        last_loss = row["loss"][-1][1] if row["loss"] else float("nan")
        print(f"| {name} | {row['steps']} | {last_loss:.3f} | {tau_value:.2f} |")
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
