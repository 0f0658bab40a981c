"""One line per tau_curve.json: its mean tau, by kind, and the kinds it skipped (device-call logs).

    python benchmarks/device/tau_summary.py TAU_CURVE_JSON LABEL
"""

import json
import statistics
import sys

result = json.load(open(sys.argv[1]))
by_kind = {}
for run in result["runs"]:
    by_kind.setdefault(run["kind"], []).append(run["tau"])
print(sys.argv[2], "mean tau", round(statistics.mean(run["tau"] for run in result["runs"]), 3),
      {kind: round(statistics.mean(taus), 2) for kind, taus in by_kind.items()},
      "skipped", result.get("skipped_kinds") or {})
