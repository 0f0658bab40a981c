#!/usr/bin/env bash
# One-GPU call (twenty-second session; issue 12): which target layer's K/V should the draft read?
# Every draft so far read the last layer's. The screen runs first, one call per seed (call16_depth.sh,
# untrained drafts, 700 steps, tau of the tree alone on the 36 prompts of record):
#   SEED=0 ARMS="plain layer22 layer15" EXTRA="--init-draft none --steps 700 --seq-len 2048 --batch-size 16
#     --lr 2e-3 --max-tokens 30000000 --with-tau" bash benchmarks/device/call16_depth.sh
#   SEED=1 (the same, no carry, the machine warm)
# This script is the next call on the same machine: it reads both seeds' reports (REPORTS, by default
# /tmp/fp0 and /tmp/fp1; summarized by ablate_training.summarize),
# prints each arm's mean tau and its paired difference from plain (per prompt-seed), and trains the
# arm with the best mean tau again beside plain for STEPS steps (seed 0, the same cached chunks:
# past ~915 steps of 16 x 2048 the 30M tokens are read a second time), so that a gain at 700 steps can be
# told from a faster start.
# Twenty-third session: the same for the arms that read several layers (ARMS="plain plus15 plus4_15" in the
# screen); the script follows whichever arm besides plain had the best mean tau.
set -u
STEPS=${STEPS:-1400}
REPORTS=${REPORTS:-/tmp/fp0/feature_probe.json /tmp/fp1/feature_probe.json}
# shellcheck disable=SC2086  # REPORTS is a list
best=$(PYTHONPATH=src python3 - $REPORTS <<'EOF'
import json, sys
sys.path.insert(0, "benchmarks")
from ablate_training import summarize  # tau per variant, paired per prompt-seed against the first

runs = [dict(run, variant=run["arm"]) for path in sys.argv[1:] for run in json.load(open(path))["runs"]]
arms = set(run["arm"] for run in runs)
if "plain" not in arms or arms == {"plain"}:
    sys.exit(f"the screen's reports hold the arms {sorted(arms)}; needed: plain and another arm (layerN, plusN...)")
rows = summarize(sorted(runs, key=lambda run: run["arm"] != "plain"))  # plain first: the reference
for row in rows[1:]:
    print(f"# {row['variant']}: tau {row['tau_mean']:.3f} (plain {rows[0]['tau_mean']:.3f}); paired vs plain "
          f"{row['paired_delta_mean']:+.3f}, better / worse {row['prompts_better']} / {row['prompts_worse']}", flush=True)
print(max(rows[1:], key=lambda row: row["tau_mean"])["variant"])
EOF
) || { echo "no screen to follow (its reason is printed beside this): run call16_depth.sh for SEED=0 and SEED=1 first"; exit 3; }
echo "$best" | grep "^#"
arm=$(echo "$best" | tail -1)
echo "longer run: plain against $arm, $STEPS steps"
SEED=0 ARMS="plain $arm" TAG=long EXTRA="--init-draft none --steps $STEPS --seq-len 2048 --batch-size 16 --lr 2e-3
  --max-tokens 30000000 --with-tau" bash benchmarks/device/call16_depth.sh
