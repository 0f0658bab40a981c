#!/usr/bin/env bash
# One-GPU call (planned in the thirty-sixth session; issue 12), on the warm machine right after
# call36_window_finetune.sh's two calls: if the draft fine-tuned to read the window (win8k_lr5) beat its start and
# the same fine-tune reading every entry (seq8k_lr5), measure its seed-0 draft on the measure of record, so the
# decision to ship needs no further call:
#   - the tree alone at 4096 and 8000, code, prose and chat, 24 prompts each, 128 new tokens (three processes);
#   - paired against the thirty-first session's record (the shipped draft reading every entry) and against the
#     thirty-fifth's runs of the shipped draft reading the same window (what the training added).
# The draft reads the window its config names (2048). Otherwise (or with FORCE=1 to measure anyway) it stops after
# printing the ablation's rows. Returns one tarball. No carry:
#   bash benchmarks/device/call36_window_followup.sh
set -u
START=$SECONDS
source benchmarks/device/train_text_env.sh   # W=/tmp/call10, the model installed, PYTHONPATH
D=/tmp/c36f
mkdir -p $D
trap 'tar czf "$OUT/call36f.tgz" -C /tmp c36f' EXIT
REPORT=$W/merged/ablation.json
[ -f "$REPORT" ] || REPORT=$W/seed0/ablation.json
lead=$(python - "$REPORT" <<'PY'
import json, sys
rows = {row["variant"]: row for row in json.load(open(sys.argv[1])).get("against_start", [])}
for row in rows.values():
    print(f"{row['variant']}: {row['paired_delta_mean']:+.3f} vs start ({row['prompts_better']} / {row['prompts_worse']})",
          file=sys.stderr)
window, whole = rows.get("win8k_lr5"), rows.get("seq8k_lr5")
leads = window is not None and window["paired_delta_mean"] > 0 and \
    (whole is None or window["paired_delta_mean"] > whole["paired_delta_mean"])
print("yes" if leads else "no")
PY
)
echo "win8k_lr5 leads: $lead ($REPORT)"
[ "$lead" = yes ] || [ "${FORCE:-0}" = 1 ] || exit 0
DRAFT=$W/seed0/runs/win8k_lr5-seed0/final
for kind in code prose chat; do
  timeout -k 10 "${LIMIT:-400}" python benchmarks/tau_curve.py --out "$D/win8k/$kind" --draft "$DRAFT" --align end \
    --lookup-tokens 0 --lengths 4096 8000 --kinds "$kind" --prompts 24 --new-tokens 128 --no-compile \
    > "$D/win8k_$kind.log" 2>&1 &
done
wait
echo "tau curves done after $((SECONDS - START)) s"
for kind in code prose chat; do
  python benchmarks/compare_tau.py "whole=docs/results/session31_2026-12-04/tau_gpu24_tree.json" \
    "win8k=$D/win8k/$kind/runs.jsonl" --lengths 4096 8000 > "$D/compare_record_$kind.md" 2>&1
  python benchmarks/compare_tau.py "shipped_window=docs/results/session35_2026-12-05/win2048_tree_${kind}_runs.jsonl" \
    "win8k=$D/win8k/$kind/runs.jsonl" --lengths 4096 8000 > "$D/compare_window_$kind.md" 2>&1
  grep -h "against" "$D/compare_record_$kind.md" "$D/compare_window_$kind.md"
done
echo "total $((SECONDS - START)) s"
