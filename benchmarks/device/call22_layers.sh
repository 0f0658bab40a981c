#!/usr/bin/env bash
# One-GPU call (twenty-second session; issue 12): which target layer's K/V should the draft read?
# Every draft so far read the last layer's. The screen runs first, one call per seed (call16_depth.sh,
# untrained drafts, 700 steps, tau of the tree alone on the 36 prompts of record):
#   SEED=0 ARMS="plain layer22 layer15" EXTRA="--init-draft none --steps 700 --seq-len 2048 --batch-size 16
#     --lr 2e-3 --max-tokens 30000000 --with-tau" bash benchmarks/device/call16_depth.sh
#   SEED=1 (the same, no carry, the machine warm)
# This script is the next call on the same machine: it reads both seeds' reports (/tmp/fp0, /tmp/fp1),
# prints each arm's tau per seed and its paired difference from plain (per prompt-seed), and trains the
# layer arm with the best mean tau again beside plain for STEPS steps (seed 0, the same cached chunks:
# past ~915 steps of 16 x 2048 the 30M tokens are read a second time), so that a gain at 700 steps can be
# told from a faster start.
set -u
STEPS=${STEPS:-1400}
best=$(python3 - <<'EOF'
import json, statistics
import sys
runs = [run for seed in (0, 1) for run in json.load(open(f"/tmp/fp{seed}/feature_probe.json"))["runs"]]
by_arm = {}
for run in runs:
    by_arm.setdefault(run["arm"], {})[run["seed"]] = run
if "plain" not in by_arm or not by_arm.keys() - {"plain"}:
    sys.exit(f"the screen's reports hold the arms {sorted(by_arm)}; needed: plain and a layerN arm")
plain = by_arm.pop("plain")
rows = []
for arm, seeds in sorted(by_arm.items()):
    paired = [a - b for seed in seeds for a, b in zip(seeds[seed]["tau_per_prompt"], plain[seed]["tau_per_prompt"])]
    mean = statistics.mean(run["tau"] for run in seeds.values())
    rows.append((mean, arm))
    taus = ", ".join(f"{run['tau']:.3f}" for run in seeds.values())
    plains = ", ".join(f"{plain[seed]['tau']:.3f}" for seed in seeds)
    error = statistics.stdev(paired) / len(paired) ** 0.5
    print(f"# {arm}: tau {taus} (plain {plains}); paired vs plain {statistics.mean(paired):+.3f} ± {error:.3f}, "
          f"better / worse {sum(d > 0 for d in paired)} / {sum(d < 0 for d in paired)}", flush=True)
print(max(rows)[1])
EOF
) || { echo "no screen to follow (its reason is printed beside this): run call16_depth.sh for SEED=0 and SEED=1 first"; exit 3; }
echo "$best" | grep "^#"
arm=$(echo "$best" | tail -1)
echo "longer run: plain against $arm, $STEPS steps"
SEED=0 ARMS="plain $arm" TAG=long EXTRA="--init-draft none --steps $STEPS --seq-len 2048 --batch-size 16 --lr 2e-3
  --max-tokens 30000000 --with-tau" bash benchmarks/device/call16_depth.sh
