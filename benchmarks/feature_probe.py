"""Would the target's final hidden state raise the draft's agreement with it? (issue 12, thirteenth session)

EAGLE feeds its draft the target's final hidden state of the previous token; a LongSpec draft reads one
target layer's K/V through attention only. Reading the newest K/V entry directly (`target_entry_input`)
changed neither the training loss nor tau (docs/training.md). This probe asks the stronger question in
training alone, before a decoding path is built for it: the shipped draft is fine-tuned twice with the
same recipe and seed (so on the same batches), once as it is ("plain") and once with W h(i - shift)
added after its self-attention ("final_state"): h = the target's final normed hidden state, read by a
hook on the target's last norm while the trainer runs the target, W zero at first, shift = the Flash
Noisy Training lag, so position i sees the state of the newest entry it may read. Both are then
measured teacher-forced on held-out prompts against the target's greedy tokens: top-1 and top-4
agreement at lag 1 (the tree root's view) and lag 3 (a depth-2 node's), at `--scored-positions`
positions near each prompt's end (those before its last token: each predicts a token of the prompt).

Not a library option: decoding would need the verification forward to hand back the hidden state of
the accepted node. A large gain here is what would justify building that.

Depth (sixteenth session; `--arms plain second_block second_layer`): the product's draft is one decoder
layer, and neither a 3x wider MLP nor more of the target's state raised its agreement, which leaves
depth. "second_block" adds a second cross-attention over the same target K/V and a second MLP after
the layer (decoding would need no new cache: the nodes run one more block); "second_layer" also adds
a second sliding-window self-attention, over the first layer's outputs (decoding would need a second
ring buffer of hidden-state K/V). The block's output projections start at zero, so both start as the
shipped draft. A gain here is what would justify changing the method's one layer.

Width from the start (seventeenth session; `--arms plain wide_mlp --init-draft none`): the eleventh
session grew the trained draft's MLP 3x and saw nothing in 800 steps, but the new units started silent;
the sixteenth saw depth help only when trained from the start. "wide_mlp" is the product's one layer with
an MLP of `--wide-intermediate-size` units (from an untrained draft: drawn that wide; from the shipped
one: grown by training/widen.py, computing the same at first). Unlike depth it is a config value the
decoding path already serves, so a gain here needs no method change.

Finished drafts (eighteenth session; `--score-drafts NAME=FOLDER ...`, no training): the same agreement of
drafts trained elsewhere (the long runs of x2_train_long.sh), to ask whether a gap the probe saw at a
short horizon is still there at the end of a long run. `--score-on continuation` scores them on the
target's own greedy continuation of each prompt (the text a tree drafts when tau is measured) rather
than on the prompt's text.

RoPE in bf16 (twenty-first session; `--arms plain bf16_rope --init-draft none --with-tau`): until then a
new draft made for a bf16 target (`from_target`, every run from an untrained draft on the GPU) rounded its
RoPE frequencies to bf16 and trained on those angles, then ran exact ones once reloaded. "bf16_rope"
trains that way again (its frequencies rounded in training only) and is measured as a reloaded draft
runs, beside "plain" (exact angles throughout), on the same batches: what the rounding cost those runs.
`--score-drafts ... --round-rope` runs finished drafts on the rounded angles, as `draft.to(torch.bfloat16)`
left them (ablate_training's tau until then), to set beside the same drafts run exactly.

Streaks and confidence (twentieth session; `--chain-depth D`, with `--score-drafts`): drafts fine-tuned on
the target's own writing agreed more per position than the human-text control and had lower tau on the
same 36 prompts. tau counts a round's run of hits, and the tree keeps nodes by the draft's cumulative
probability, so this adds the teacher-forced chain length over lags 1..D (top-1, and top-4 at every
depth) and the draft's mean top-1 / top-4 probability at lag 1.

Which target layer (twenty-second session; `--arms plain layer22 layer15 --init-draft none --with-tau`): every
draft so far read the last target layer's K/V, the paper's choice, and no session had asked whether another
layer serves it better. EAGLE-3 gains by reading low, middle and high layers instead of the top one alone.
"layerN" is the product's draft with `target_layer_index=N`, a config value generate() already serves at
no cost (every layer's K/V is in the cache), so it is measured by tau as well as by agreement.

Several target layers at once (twenty-third session; `--arms plain plus15 plus4_15 --init-draft none --with-tau`):
no single layer beat the last one, but EAGLE-3 fuses several. "plusN_M..." is the product's draft with
`extra_target_layer_indices=[N, M, ...]`: its cross-attention reads the last layer and also layers N, M, ...,
each through its own block of query heads, summed in o_proj. generate() serves it (each layer's cache
buffers are read in place), so it is measured by tau. From the shipped draft (`--init-draft embedded`) the
new blocks are grafted on (training/widen.py `add_target_layers`: zero o_proj columns, so the draft starts
as the shipped one); from an untrained one they are drawn with the rest.

    python benchmarks/feature_probe.py --out /tmp/feature_probe --seeds 0 --steps 800 --seq-len 8192 \
        --batch-size 4 --lr 5e-4 --corpus-mix code=0.2,prose=0.1,docs=0.1,man=0.1,multilingual=0.1,pylib=0.05

The method's own two ideas, and the noisy shift's weights (forty-first session; `--arms plus4 plus4_reach
plus4_noao plus4_nonoisy --init-draft none --with-tau --paired-base plus4`): recipe suffixes (arm_parts) turn off
Anchor-Offset Indices or Flash Noisy Training, or weight the shifts by how often inference drafts at each.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import types
from dataclasses import asdict, replace
from pathlib import Path

import torch
from torch import nn

from hf_longspec.bench.machine import machine_info
from hf_longspec.embedded import load_embedded_draft, load_embedded_target
from hf_longspec.evaluation import paired_difference, prompt_digest, seed_averaged_deltas
from hf_longspec.publishing.weights_digest import model_weights_digest
from hf_longspec.modeling_longspec import (LongSpecCrossAttention, LongSpecDraftModel, LongSpecMLP,
                                           LongSpecRMSNorm, LongSpecSelfAttention, ZeroStartLinear)
from hf_longspec.target_support import target_layers_kv
from hf_longspec.training.run import TrainRecipe, initial_draft, new_draft, train_draft

sys.path.insert(0, str(Path(__file__).parent))
from ablate_training import dataset_for, eval_prompts, held_out_tau  # noqa: E402  (sibling scripts)
from draft_context_probe import target_pass_cache  # noqa: E402

LAGS = (1, 3)


def final_norm(target):
    """The target's last norm: its output is the hidden state the LM head reads."""
    return target.get_decoder().norm


def read_final_state(draft, target):
    """`draft` in place, plus `feature_proj` of the target's final hidden state at i - shift; returns the
    hook's handle (remove it when done). The hook keeps the latest target forward's states on the draft."""
    hidden = draft.config.hidden_size
    draft.cross_attn.register_module("feature_proj", ZeroStartLinear(hidden, hidden, bias=False))  # zero
    draft.final_states = None

    def keep(module, args, output):
        draft.final_states = output.detach()

    plain = draft._cross_attention_mlp_logits

    def with_state(self, hidden, cos, sin, target_keys, target_values, shift, position_ids):
        states, proj = self.final_states, self.cross_attn.feature_proj
        lagged = hidden.new_zeros(hidden.shape)
        if shift < hidden.shape[1]:
            lagged[:, shift:] = proj(states[:, : hidden.shape[1] - shift].to(proj.weight.dtype))
        return plain(hidden + lagged, cos, sin, target_keys, target_values, shift, position_ids)

    draft._cross_attention_mlp_logits = types.MethodType(with_state, draft)
    return final_norm(target).register_forward_hook(keep)


def add_depth(draft, self_attention: bool, seed: int):
    """`draft` in place, plus a second block after its layer: [a sliding-window self-attention over the
    layer's outputs,] a cross-attention over the same target K/V with the same Flash Noisy Training
    shift, and an MLP, each pre-normed and residual. Weights are drawn like a new draft's (seeded), the
    output projections set to zero: the draft computes exactly what it did until training moves them."""
    config, reference = draft.config, draft.norm.weight
    parts = {"cross_attn_layernorm": LongSpecRMSNorm(config.hidden_size, config.rms_norm_eps),
             "cross_attn": LongSpecCrossAttention(config),
             "post_attention_layernorm": LongSpecRMSNorm(config.hidden_size, config.rms_norm_eps),
             "mlp": LongSpecMLP(config)}
    if self_attention:
        parts = {"input_layernorm": LongSpecRMSNorm(config.hidden_size, config.rms_norm_eps),
                 "self_attn": LongSpecSelfAttention(config), **parts}
    block = nn.ModuleDict(parts).to(device=reference.device, dtype=reference.dtype)
    generator = torch.Generator(device=reference.device).manual_seed(seed)
    with torch.no_grad():
        for module in block.modules():
            if isinstance(module, nn.Linear):
                module.weight.normal_(0.0, config.initializer_range, generator=generator)
                if module.bias is not None:
                    module.bias.zero_()
        outputs = [block["cross_attn"].o_proj, block["mlp"].down_proj]
        outputs += [block["self_attn"].o_proj] if self_attention else []
        for projection in outputs:
            projection.weight.zero_()
    draft.register_module("second_block", block)

    def deeper(self, hidden, cos, sin, target_keys, target_values, shift, position_ids):
        hidden = self._cross_attention_mlp(hidden, cos, sin, target_keys, target_values, shift, position_ids)
        second = self.second_block
        if "self_attn" in second:
            hidden = hidden + second["self_attn"].forward_sequence(second["input_layernorm"](hidden), cos, sin, position_ids)
        hidden = hidden + second["cross_attn"].forward_sequence(
            second["cross_attn_layernorm"](hidden), cos, sin, target_keys, target_values, shift, position_ids, self.rotary_emb)
        hidden = hidden + second["mlp"](second["post_attention_layernorm"](hidden))
        return self._logits(hidden)

    draft._cross_attention_mlp_logits = types.MethodType(deeper, draft)


class _NoHook:
    def remove(self) -> None:
        pass


class _RoundedRope:
    """The draft's RoPE computed from bf16-rounded frequencies (main before the twenty-first session, for
    a draft made on a bf16 target) until `remove()`."""

    def __init__(self, draft):
        self.rotary = rotary = draft.rotary_emb

        def rounded(position_ids, dtype):  # the module's own forward, over the rounded frequencies
            exact = rotary.inv_freq
            rotary.inv_freq = exact.bfloat16().float()
            try:
                return type(rotary).forward(rotary, position_ids, dtype)
            finally:
                rotary.inv_freq = exact

        rotary.forward = rounded  # an instance attribute: nn.Module.__call__ finds it first

    def remove(self) -> None:
        self.rotary.__dict__.pop("forward", None)


TARGET_INIT_SUFFIX = "_tinit"
# Flash Noisy Training's shifts weighted by how often inference drafts at each: the node at depth k (shift
# k + 1) matters when the accepted path reaches it, 100 / 78 / 64 / 49 / 38% of the shipped draft's rounds
# for depths 0-4 (docs/training.md, the thirty-first session's acceptance per depth, the draft alone)
REACH_SHIFT_WEIGHTS = [1.0, 0.78, 0.64, 0.49, 0.38]
RECIPE_SUFFIXES = {  # suffix -> the recipe fields it sets (forty-first session: the method's own two ideas)
    "_tinit": {"draft_init": "target"},
    "_noao": {"anchor_offset": False},
    "_nonoisy": {"noisy": False},
    "_reach": {"noise_shift_weights": REACH_SHIFT_WEIGHTS},
}
RECIPE_SUFFIX = re.compile("(" + "|".join(RECIPE_SUFFIXES) + r")$|_roll(\d+)$|_shifts(\d+)$")


def arm_parts(arm: str) -> tuple[str, dict]:
    """The arm's draft and the recipe changes its suffixes ask for: "ARM_tinit" is ARM drawn from the target's
    weights instead of random ones (draft_init "target", training/target_init.py; untrained drafts only),
    "ARM_rollK" ARM trained with a K-step rollout (rollout_steps K, EAGLE-3's training-time test), "ARM_noao"
    without Anchor-Offset Indices, "ARM_nonoisy" without Flash Noisy Training (shift 1 always), "ARM_reach"
    with its shifts 1-5 weighted by how often inference reaches them (REACH_SHIFT_WEIGHTS), "ARM_shiftsN"
    with its shift uniform over 1..N."""
    changes = {}
    while (match := RECIPE_SUFFIX.search(arm)) and match.start() > 0:
        if match.group(1):
            changes.update(RECIPE_SUFFIXES[match.group(1)])
        elif match.group(2):
            changes["rollout_steps"] = int(match.group(2))
        else:
            changes["noise_shift_weights"] = [1.0] * int(match.group(3))
        arm = arm[: match.start()]
    return arm, changes


def base_arm(arm: str) -> str:
    """The arm without its recipe suffixes (arm_parts)."""
    return arm_parts(arm)[0]


def layer_of(arm: str) -> int | None:
    """N for an arm named "layerN" (the draft reads target layer N's K/V), else None."""
    match = re.fullmatch(r"layer(\d+)", base_arm(arm))
    return int(match.group(1)) if match else None


def extra_layers_of(arm: str) -> list[int] | None:
    """[N, M, ...] for an arm named "plusN_M..." (the draft reads the last layer's K/V and also layers N, M,
    ...: extra_target_layer_indices), else None."""
    match = re.fullmatch(r"plus(\d+(?:_\d+)*)", base_arm(arm))
    return [int(n) for n in match.group(1).split("_")] if match else None


def reads_other_layers(arm: str) -> bool:
    """Whether the arm's draft reads target layers the shipped one does not ("layerN", "plusN...")."""
    return layer_of(arm) is not None or extra_layers_of(arm) is not None


def arm_name(text: str) -> str:
    """--arms: one of ARMS, "layerN" for a draft that reads target layer N's K/V (N >= 0), or "plusN_M..."
    for one that reads the last layer's and also layers N, M, ..."""
    if base_arm(text) in ARMS or reads_other_layers(text):
        return text
    raise argparse.ArgumentTypeError(f"arm {text!r}; allowed: {', '.join(ARMS)}, layerN (N = a target layer "
                                     "index), or plusN_M... (the last layer and also layers N, M, ...), each with an "
                                     f"optional {TARGET_INIT_SUFFIX!r} (drawn from the target's weights), _rollK (a K-step "
                                     "rollout in training), _noao, _nonoisy, _reach or _shiftsN (arm_parts)")


def arm_recipe(arm: str, recipe: TrainRecipe, wide_intermediate_size: int) -> TrainRecipe:
    """The recipe an arm trains with: "wide_mlp" asks for a wider MLP (drawn wide, or grown), "layerN" for
    the cross-attention over target layer N, "plusN..." for one over the last layer and layers N, ... (config
    values: generate() serves them as they are), every other arm the recipe as it is; the suffixes change it as
    arm_parts says ("..._tinit" starts the draft from the target's weights, "..._rollK" trains a K-step rollout)."""
    arm, changes = arm_parts(arm)
    recipe = replace(recipe, **changes) if changes else recipe
    if arm == "wide_mlp":
        return replace(recipe, draft_overrides={**recipe.draft_overrides, "intermediate_size": wide_intermediate_size})
    if layer_of(arm) is not None:
        return replace(recipe, draft_overrides={**recipe.draft_overrides, "target_layer_index": layer_of(arm)})
    if extra_layers_of(arm) is not None:
        return replace(recipe, draft_overrides={**recipe.draft_overrides,
                                                "extra_target_layer_indices": extra_layers_of(arm)})
    return recipe


def change_draft(arm: str, draft, target, seed: int):
    """Make `draft` the arm's (in place); returns a handle whose `remove()` undoes any hook on the target."""
    arm = base_arm(arm)
    if arm == "final_state":
        return read_final_state(draft, target)
    if arm == "bf16_rope":
        return _RoundedRope(draft)
    if arm in ("second_block", "second_layer"):
        add_depth(draft, self_attention=arm == "second_layer", seed=seed)
    elif arm not in ("plain", "wide_mlp") and not reads_other_layers(arm):  # those come with their recipe (arm_recipe)
        raise ValueError(f"unknown arm {arm!r}; allowed: {', '.join(ARMS)}, layerN, plusN_M...")
    return _NoHook()


ARMS = ("plain", "final_state", "second_block", "second_layer", "wide_mlp", "bf16_rope")
# arms whose trained draft generate() runs as trained (tau is measured only for these), and every
# "layerN"; "bf16_rope" is measured as it would run reloaded, with exact frequencies
DECODABLE_ARMS = ("plain", "wide_mlp", "bf16_rope")


def decodable(arm: str) -> bool:
    return base_arm(arm) in DECODABLE_ARMS or reads_other_layers(arm)


def chain_lengths(hits: list[torch.Tensor]) -> float:
    """Mean tokens a teacher-forced chain gains per round: hits[d - 1][j] says whether the draft at lag d,
    at position j, gives the target's token there. A round whose root is position j accepts depth d while
    depths 1..d all hit, depth d read at position j + d - 1 (it reads the target's K/V up to j - 1, as the
    d-th drafted node does). Rounds start at every position with all depths inside the scored span; 1 is
    added for the target's own token. Unlike the per-position shares, this weighs streaks as tau does."""
    depth = len(hits)
    starts = hits[0].shape[0] - depth + 1
    alive = torch.ones(starts, dtype=torch.bool, device=hits[0].device)
    accepted = torch.zeros(starts, device=hits[0].device)
    for d, hit in enumerate(hits):
        alive &= hit[d : d + starts]
        accepted += alive
    return 1.0 + float(accepted.mean())


@torch.no_grad()
def agreements(target, drafts: dict, prompts, scored: int, chain_depth: int = 0) -> dict:
    """Top-1 / top-4 agreement with the target's greedy token, per lag, pooled and per (kind, length), of
    each draft in `drafts` (name -> draft, each reading its own target layer), the target run once per prompt (every prompt scores the
    same number of positions, so means of shares are pooled shares). chain_depth D > 0 adds "chain":
    `chain_lengths` over lags 1..D, of the draft's top-1 and of its top-4 (the true token among the
    draft's four best at every depth, the tree's reach when each node keeps four children), and
    "confidence": the draft's mean probability of its top-1 and of its top-4 at lag 1. The tree keeps
    nodes by cumulative draft probability, so a draft surer than it is right spends them on one path;
    set beside lag-1 top-1 / top-4 agreement, confidence shows that."""
    per_cell: dict = {name: {} for name in drafts}
    lags = sorted(set(LAGS) | set(range(1, chain_depth + 1)))
    for kind, length, ids in prompts:
        target_logits, cache = target_pass_cache(target, ids)
        greedy = target_logits[-scored - 1 : -1].argmax(-1)
        del target_logits
        for name, draft in drafts.items():
            keys, values = target_layers_kv(cache, draft.target_layers)  # each its own layers, as in training
            cell = per_cell[name].setdefault(f"{kind}@{length}", {})
            hits: dict = {"top1": [], "top4": []}
            for lag in lags:  # the draft's logits at j and the target's at j both predict token j + 1
                logits = draft(ids, keys, values, noise_shift=lag).logits[0][-scored - 1 : -1]
                best = logits.topk(4, dim=-1)
                top1, top4 = best.indices[:, 0] == greedy, (best.indices == greedy[:, None]).any(-1)
                if lag in LAGS:  # the shares of positions whose greedy token is the top-1 / among the top-4
                    cell.setdefault(str(lag), []).append({"top1": float(top1.float().mean()),
                                                          "top4": float(top4.float().mean())})
                if lag <= chain_depth:
                    hits["top1"].append(top1)
                    hits["top4"].append(top4)
                if lag == 1 and chain_depth:  # probabilities of the four best: softmax of their logits over all
                    sure = (best.values.float() - logits.float().logsumexp(-1, keepdim=True)).exp()
                    cell.setdefault("confidence", []).append({"top1": float(sure[:, 0].mean()),
                                                              "top4": float(sure.sum(-1).mean())})
            if chain_depth:
                cell.setdefault("chain", []).append({key: chain_lengths(rows) for key, rows in hits.items()})

    def mean(rows):
        return {key: statistics.mean(row[key] for row in rows) for key in ("top1", "top4")}

    keys_kept = [str(lag) for lag in LAGS] + (["chain", "confidence"] if chain_depth else [])
    # lags keyed as strings, as they read back from JSON
    return {name: {"pooled": {key: mean([row for cell in cells.values() for row in cell[key]]) for key in keys_kept},
                   "cells": {cell: {key: mean(rows) for key, rows in by_key.items()} for cell, by_key in cells.items()}}
            for name, cells in per_cell.items()}


def agreement(target, draft, prompts, scored: int) -> dict:
    """`agreements` of one draft."""
    return agreements(target, {"draft": draft}, prompts, scored)["draft"]


@torch.no_grad()
def continued(target, prompts, tokens: int) -> list:
    """Each prompt followed by the target's own greedy continuation of `tokens` tokens (end of text
    suppressed, as draft_context_probe does), the text a tree drafts when tau is measured: scored at its
    last `tokens` positions, agreement is the chain's first-depth acceptance, without the tree's noise."""
    out = []
    for kind, length, ids in prompts:
        new = target.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                              min_new_tokens=tokens, do_sample=False)
        out.append((kind, length, new))
    return out


def run_label(run: dict) -> str:
    """The arm's name, with the MLP width for "wide_mlp" (calls with other widths merge into one report;
    a "layerN" arm names its layer itself)."""
    width = run["recipe"]["draft_overrides"].get("intermediate_size")
    return f"{run['arm']} {width}" if run["arm"] == "wide_mlp" and width is not None else run["arm"]


def merged(paths: list[str]) -> dict:
    """The runs of several calls' reports (other seeds) in one; refused when they measured otherwise."""
    reports = [json.loads(Path(path).read_text()) for path in paths]
    keep = ("init_draft", "steps", "seq_len", "batch_size", "lr", "warmup_steps", "max_tokens", "corpus_mix", "corpus_max_epochs",
            "eval_kinds", "eval_lengths", "eval_prompts", "scored_positions")
    for path, report in zip(paths[1:], reports[1:]):
        differ = [key for key in keep if report["settings"].get(key) != reports[0]["settings"].get(key)]
        if differ or report["start"] != reports[0]["start"]:
            raise ValueError(f"{path} measured something else than {paths[0]}: {differ or ['start']}")
    runs = [run for report in reports for run in report["runs"]]
    settings = {**reports[0]["settings"], "seeds": sorted({run["seed"] for run in runs}), "out": None}
    settings.pop("wide_intermediate_size", None)  # the calls may differ in it; each run's recipe records its own
    return {**reports[0], "settings": settings, "runs": runs, "merge": list(paths),
            "machines": [report["machine"] for report in reports]}


def seeds_shown(runs: list[dict]) -> str:
    """What a bar of the agreement panel is: one seed's value, or the mean over several."""
    seeds = sorted({run["seed"] for run in runs})
    return f"(seed {seeds[0]})" if len(seeds) == 1 else f"(mean over seeds {', '.join(map(str, seeds))})"


def plot(report: dict, path: Path) -> None:
    """Loss against steps per run, and lag-1 top-1 per cell and arm (mean over seeds) beside the start."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with_tau = all("tau" in run for run in report["runs"])
    fig, axes = plt.subplots(1, 2 + with_tau, figsize=(12 + 4 * with_tau, 4.2))
    loss_ax, cell_ax = axes[:2]
    order = sorted(report["runs"], key=lambda run: (run["arm"] != "plain", run["arm"],  # plain, then by name and width
                                                    run["recipe"]["draft_overrides"].get("intermediate_size", 0)))
    arms = list(dict.fromkeys(run_label(run) for run in order))
    for run in report["runs"]:
        steps, values = zip(*run["loss"])
        loss_ax.plot(steps, values, color=f"C{arms.index(run_label(run))}", alpha=0.5 + 0.5 * (run["seed"] == 0),
                     label=f"{run_label(run)} seed {run['seed']}")
    scratch = report["settings"].get("init_draft") == "none"
    loss_ax.set(xlabel="step", ylabel="training loss",
                title="from untrained drafts" if scratch else "fine-tune from the shipped draft")
    if scratch:  # the first logs are far above the rest
        loss_ax.set_ylim(top=min(10.0, max(value for run in report["runs"] for _, value in run["loss"])))
    loss_ax.legend(fontsize=8)
    cells = sorted(report["start"]["cells"])
    width = 0.8 / (len(arms) + (not scratch))
    rows = [] if scratch else [("start", [report["start"]["cells"][cell]["1"]["top1"] for cell in cells])]
    for arm in arms:
        mine = [run for run in report["runs"] if run_label(run) == arm]
        rows.append((arm, [statistics.mean(run["cells"][cell]["1"]["top1"] for run in mine) for cell in cells]))
    for index, (name, values) in enumerate(rows):
        cell_ax.bar([c + index * width for c in range(len(cells))], values, width, label=name)
    cell_ax.set_xticks([c + width * (len(rows) - 1) / 2 for c in range(len(cells))], cells, rotation=20, fontsize=8)
    shown = [value for _, values in rows for value in values]
    cell_ax.set(ylabel="lag-1 top-1 agreement", ylim=(min(shown) - 0.05, max(shown) + 0.03),
                title="held-out, teacher-forced " + seeds_shown(report["runs"]))
    cell_ax.legend(fontsize=8)
    if with_tau:  # the tree alone on the same prompts: bars the mean over seeds, dots each seed
        tau_ax = axes[2]
        for index, arm in enumerate(arms):
            taus = [run["tau"] for run in report["runs"] if run_label(run) == arm]
            tau_ax.bar(index, statistics.mean(taus), color=f"C{index}", alpha=0.6)
            tau_ax.plot([index] * len(taus), taus, "k.")
        tau_ax.set_xticks(range(len(arms)), arms, rotation=20, fontsize=8)
        everything = [run["tau"] for run in report["runs"]]
        tau_ax.set(ylabel="tau, tree alone", ylim=(min(everything) - 0.15, max(everything) + 0.1),
                   title="held-out tau " + seeds_shown(report["runs"]))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def starting_draft(target, recipe: TrainRecipe):
    """The shipped draft (init_draft "embedded"), or an untrained one drawn from the recipe's seed."""
    return initial_draft(target, recipe) if recipe.init_draft is not None else new_draft(target, recipe)


def scored_draft(target, folder: str):
    """A finished draft folder ("embedded": the shipped one) loaded in the target's dtype and bound to it."""
    if folder == "embedded":
        return load_embedded_draft(target)
    reference = target.get_input_embeddings().weight
    draft = LongSpecDraftModel.from_pretrained(folder, dtype=reference.dtype)
    return draft.to(reference.device).eval().bind(target)


def score_drafts(args, target, prompts) -> dict:
    """The probe's agreement of finished drafts, side by side on the same prompts (no training): at the
    prompts' last `--scored-positions` positions, or (`--score-on continuation`) on the target's own
    greedy continuation of each prompt."""
    names = [name for name, _ in args.score_drafts]
    if len(set(names)) != len(names):
        raise SystemExit(f"--score-drafts names {names} repeat one; allowed: a different NAME for each folder")
    report = {"machine": machine_info(target.device), "settings": vars(args), "scored": [],
              "prompts": [{"kind": kind, "length": length, "digest": prompt_digest(ids)} for kind, length, ids in prompts]}
    scored, originals = args.scored_positions, prompts
    if args.score_on == "continuation":
        prompts, scored = continued(target, prompts, args.continuation_tokens), args.continuation_tokens
    drafts = {name: scored_draft(target, folder) for name, folder in args.score_drafts}
    for draft in drafts.values() if args.round_rope else ():
        _RoundedRope(draft)  # kept to the end: the drafts as `.to(torch.bfloat16)` left them before the fix
    chain_depth = args.chain_depth
    measured = agreements(target, drafts, prompts, scored, chain_depth=chain_depth)
    for name, folder in args.score_drafts:
        speed = Path(folder) / "training_speed.json"
        step = json.loads(speed.read_text()).get("global_step") if speed.is_file() else None
        width = drafts[name].config.intermediate_size
        # the tree alone (no prompt-lookup chain), as ablate_training measures it, on the prompts scored
        tau = (held_out_tau(target, drafts[name], originals, args.continuation_tokens, {"longspec_lookup_tokens": 0})
               if args.with_tau else {})
        report["scored"].append({"name": name, "folder": folder, "intermediate_size": width, "global_step": step,
                                 **measured[name], **tau, "weights_digest": model_weights_digest(drafts[name])})
        lag1, lag3 = measured[name]["pooled"]["1"], measured[name]["pooled"]["3"]
        chain = measured[name]["pooled"].get("chain")
        sure = measured[name]["pooled"].get("confidence")
        chained = (f", chain of {chain_depth}: {chain['top1']:.2f} (top-4 {chain['top4']:.2f}), lag-1 confidence "
                   f"{sure['top1']:.3f}" if chain else "")
        print(f"{name} ({width} MLP units, step {step}): lag-1 top-1 {lag1['top1']:.3f} top-4 {lag1['top4']:.3f}, "
              f"lag-3 top-1 {lag3['top1']:.3f}{chained}" + (f", tau {tau['tau']:.3f}" if tau else ""), flush=True)
    return report


def name_and_folder(spec: str) -> tuple[str, str]:
    """--score-drafts NAME=FOLDER (FOLDER "embedded": the shipped draft)."""
    name, sep, folder = spec.partition("=")
    if not sep or not name or not folder:
        raise argparse.ArgumentTypeError(f"{spec!r}: allowed NAME=FOLDER (a draft folder, or 'embedded')")
    if folder != "embedded" and not (Path(folder) / "config.json").is_file():
        raise argparse.ArgumentTypeError(f"{spec!r}: {folder} holds no config.json; allowed a draft folder or 'embedded'")
    return name, folder


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--merge", nargs="+", default=None, help="join these feature_probe.json files (other seeds)")
    parser.add_argument("--score-drafts", nargs="+", type=name_and_folder, default=None, metavar="NAME=FOLDER",
                        help="score these finished drafts (no training) and write feature_probe_scored.json")
    parser.add_argument("--score-on", choices=["prompt", "continuation"], default="prompt",
                        help="with --score-drafts: the prompts' own text, or the target's greedy continuation of each")
    parser.add_argument("--continuation-tokens", type=int, default=96, help="with --score-on continuation")
    parser.add_argument("--dtype", choices=["auto", "float32", "bfloat16"], default="auto",
                        help="the target's and the drafts' (auto: float32 on the CPU, bfloat16 on CUDA)")
    parser.add_argument("--with-tau", action="store_true",
                        help="also each draft's tau, the tree alone, on the same prompts (--continuation-tokens new "
                             f"tokens): the scored drafts, or the trained arms ({', '.join(DECODABLE_ARMS)}, layerN, "
                             "plusN... only)")
    parser.add_argument("--round-rope", action="store_true",
                        help="with --score-drafts: run the drafts on RoPE from bf16-rounded frequencies, as "
                             "`draft.to(torch.bfloat16)` left them before the twenty-first session (and so the "
                             "ablations' tau until then)")
    parser.add_argument("--chain-depth", type=int, default=0,
                        help="with --score-drafts: also the teacher-forced chain length over lags 1..D "
                             "(meant for --score-on continuation, where the text is the target's greedy tokens)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--arms", nargs="+", type=arm_name, default=["plain", "final_state"],
                        help=f"the drafts trained per seed ({', '.join(ARMS)}, layerN, plusN_M...): plain, the target's "
                             "final state, one more block, a wider MLP, RoPE from bf16-rounded frequencies in training, "
                             "the cross-attention over target layer N's K/V instead of the last layer's, or over the "
                             "last layer's and also layers N, M, ...")
    parser.add_argument("--paired-base", default=None,
                        help="the arm every other arm's tau is paired against, prompt by prompt (one of --arms; "
                             "default: plain)")
    parser.add_argument("--wide-intermediate-size", type=int, default=4608,
                        help="the MLP width of the wide_mlp arm (the product's draft has 1536)")
    parser.add_argument("--init-draft", choices=["embedded", "none"], default="embedded",
                        help="fine-tune the shipped draft, or train each arm from an untrained draft (seeded)")
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warmup-steps", type=int, default=50)
    parser.add_argument("--max-tokens", type=int, default=40_000_000)
    parser.add_argument("--corpus-mix", default="code=0.2,prose=0.1,docs=0.1,man=0.1,multilingual=0.1,pylib=0.05")
    parser.add_argument("--corpus-max-epochs", type=float, default=2)
    parser.add_argument("--eval-kinds", nargs="+", default=["code", "prose", "chat"])
    parser.add_argument("--eval-lengths", type=int, nargs="+", default=[2048, 8000])
    parser.add_argument("--eval-prompts", type=int, default=6)
    parser.add_argument("--scored-positions", type=int, default=512)
    parser.add_argument("--data-cache", default=None,
                        help="keep the tokenized chunks here, so a later call on the same machine loads them")
    args = parser.parse_args(argv)
    layered = [arm for arm in args.arms if layer_of(arm) is not None]  # "plusN" arms graft onto the shipped draft
    if layered and args.init_draft != "none" and not args.score_drafts and not args.merge:
        parser.error(f"arms {layered} read another target layer than the shipped draft was trained on; allowed: "
                     "them with --init-draft none (untrained drafts)")
    from_target = [arm for arm in args.arms if arm_parts(arm)[1].get("draft_init")]
    if from_target and args.init_draft != "none" and not args.score_drafts and not args.merge:
        parser.error(f"arms {from_target} draw an untrained draft from the target's weights; allowed: them with "
                     "--init-draft none")
    if args.paired_base is not None and args.paired_base not in args.arms and not args.score_drafts and not args.merge:
        parser.error(f"--paired-base {args.paired_base!r} is not among --arms {args.arms}; allowed: one of them")
    undecodable = [arm for arm in args.arms if not decodable(arm)]
    if args.with_tau and not args.score_drafts and not args.merge and undecodable:
        parser.error(f"--with-tau cannot measure arms {undecodable}: generate() runs only the product's draft; "
                     f"allowed arms: {', '.join(DECODABLE_ARMS)}, layerN, plusN...")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        report = merged(args.merge)
        (out / "feature_probe.json").write_text(json.dumps(report, indent=1))
        plot(report, out / "feature_probe.png")
        print(table(report))
        print(paired_table(report))
        return 0
    target, tokenizer = load_embedded_target(dtype=None if args.dtype == "auto" else getattr(torch, args.dtype))
    prompts = eval_prompts(tokenizer, args.eval_lengths, args.eval_kinds, args.eval_prompts, target.device)
    if args.score_drafts:
        report = score_drafts(args, target, prompts)
        (out / "feature_probe_scored.json").write_text(json.dumps(report, indent=1))
        return 0
    base = TrainRecipe(output_dir="", max_steps=args.steps, seq_len=args.seq_len, batch_size=args.batch_size,
                       learning_rate=args.lr, warmup_steps=args.warmup_steps, max_tokens=args.max_tokens,
                       corpus_mix=args.corpus_mix, corpus_max_epochs=args.corpus_max_epochs, save_steps=10**9,
                       logging_steps=max(1, args.steps // 20), overwrite_output=True,
                       init_draft=None if args.init_draft == "none" else args.init_draft,
                       data_cache=args.data_cache)
    report = {"machine": machine_info(target.device), "settings": vars(args), "runs": []}
    start = starting_draft(target, base).to(target.device).eval().bind(target)
    report["start"] = agreement(target, start, prompts, args.scored_positions)
    del start
    datasets = {}
    for seed in args.seeds:
        for arm in args.arms:
            recipe = arm_recipe(arm, replace(base, output_dir=str(out / "runs" / f"{arm}-seed{seed}"), seed=seed),
                                args.wide_intermediate_size)
            dataset = dataset_for(datasets, tokenizer, recipe)
            draft = starting_draft(target, recipe)
            hook = change_draft(arm, draft, target, seed)
            try:
                begin = time.perf_counter()
                draft = train_draft(target, tokenizer, recipe, draft=draft, dataset=dataset, progress=False)
                seconds = time.perf_counter() - begin
                draft.eval()
                if arm == "bf16_rope":
                    hook.remove()  # trained on rounded angles, measured as the reloaded draft runs
                measured = agreement(target, draft, prompts, args.scored_positions)
                if args.with_tau:  # the tree alone, as ablate_training measures it
                    measured.update(held_out_tau(target, draft.to(target.dtype), prompts, args.continuation_tokens,
                                                 {"longspec_lookup_tokens": 0}))
            finally:  # the target must not keep feeding a draft that is gone
                hook.remove()
            log = json.loads((Path(recipe.output_dir) / "final" / "training_log.json").read_text())
            losses = [(entry["step"], entry["loss"]) for entry in log if "loss" in entry]
            report["runs"].append({"arm": arm, "seed": seed, "recipe": asdict(recipe), "train_seconds": seconds,
                                   "loss": losses, **measured})
            lag1 = measured["pooled"]["1"]
            print(f"{arm} seed {seed}: lag-1 top-1 {lag1['top1']:.3f} top-4 {lag1['top4']:.3f}, "
                  f"last loss {statistics.mean(l for _, l in losses[-5:]):.3f} ({seconds:.0f} s)"
                  + (f", tau {measured['tau']:.3f}" if "tau" in measured else ""), flush=True)
            (out / "feature_probe.json").write_text(json.dumps(report, indent=1))
            del draft
            if target.device.type == "cuda":
                torch.cuda.empty_cache()
    print(table(report))
    print(paired_table(report))
    return 0


def paired_against(report: dict, base: str = "plain") -> list[dict]:
    """Each trained arm's tau against `base`'s, prompt by prompt: per prompt the difference averaged over
    the seeds both ran (the same batches per seed), then its mean over the prompts, the standard error of
    that mean, and the prompts better and worse. Arms without per-prompt tau, or without a `base` run of a
    shared seed, are left out."""
    by_arm: dict[str, dict[int, list[float]]] = {}
    for run in report["runs"]:
        if "tau_per_prompt" in run:
            by_arm.setdefault(run_label(run), {})[run["seed"]] = run["tau_per_prompt"]
    rows = []
    for arm, seeds in by_arm.items():
        deltas = seed_averaged_deltas(seeds, by_arm.get(base, {}))
        if arm == base or not deltas:
            continue
        shared = sorted(set(seeds) & set(by_arm[base]))
        rows.append({"arm": arm, "base": base, "seeds": shared, "prompts": len(deltas), **paired_difference(deltas)})
    return rows


def paired_table(report: dict) -> str:
    rows = paired_against(report, report.get("settings", {}).get("paired_base") or "plain")
    if not rows:
        return ""
    lines = ["| arm | against | seeds | paired tau difference per prompt (± s.e.) | better / worse |", "|---|---|---|---|---|"]
    lines += [f"| {r['arm']} | {r['base']} | {', '.join(map(str, r['seeds']))} | {r['mean']:+.3f} ± {r['stderr']:.3f} "
              f"| {r['better']} / {r['worse']} |" for r in rows]
    return "\n".join(lines)


def table(report: dict) -> str:
    rows = [("start", report["start"])] + [(f"{run_label(r)} s{r['seed']}", r) for r in report["runs"]]
    names = sorted(report["start"]["cells"])
    with_tau = any("tau" in row for _, row in rows)  # --with-tau: the trained arms' tau (the start has none)
    lines = ["| draft | " + " | ".join(f"lag {lag} top-1 / top-4" for lag in LAGS) + " | "
             + " | ".join(f"{name} lag-1 top-1" for name in names) + " |" + (" tau |" if with_tau else ""),
             "|---" * (1 + len(LAGS) + len(names) + with_tau) + "|"]
    for name, row in rows:
        pooled = " | ".join(f"{row['pooled'][str(lag)]['top1']:.3f} / {row['pooled'][str(lag)]['top4']:.3f}"
                            for lag in LAGS)
        cells = " | ".join(f"{row['cells'][cell]['1']['top1']:.3f}" for cell in names)
        tau = (f" {row['tau']:.3f} |" if "tau" in row else " |") if with_tau else ""
        lines.append(f"| {name} | {pooled} | {cells} |{tau}")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
