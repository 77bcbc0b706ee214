#!/usr/bin/env bash
# Regenerates requirements.lock from requirements.in + overrides.txt (needs `uv`: pip install uv).
# vLLM is resolved with its whole tree; overrides.txt settles torch on the release this machine's
# pip cap allows and drops GPU-only kernels the CPU never loads. SGLang and LMCache pin versions
# that conflict with vLLM's (torch, openai, numba, grpcio, opentelemetry, outlines), so they are
# appended unresolved: the suite imports only their storage and connector modules.
set -euo pipefail
cd "$(dirname "$0")"
out=$(mktemp)
uv pip compile requirements.in --override overrides.txt --python-version 3.11 \
  --python-platform x86_64-manylinux_2_36 --find-links /opt/wheels \
  --extra-index-url file:///opt/pypi-more/simple --index-strategy unsafe-best-match \
  --no-annotate --no-header -o "$out" >/dev/null
{
  echo "# make test-engines' one lock file: every package of the engine suite's venv, installed with pip --no-deps."
  echo "# Regenerate with tests/engines/lock.sh (see that file for why sglang and lmcache are appended unresolved)."
  cat "$out"
  echo "# Installed without their own requirements: their pins conflict with vllm's (torch, openai, numba, grpcio,"
  echo "# opentelemetry, outlines); the parts the suite imports need only what is above."
  cat extras.txt
} > requirements.lock
rm -f "$out"
echo "wrote requirements.lock ($(grep -c '==' requirements.lock) pins)"
