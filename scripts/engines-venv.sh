#!/usr/bin/env bash
# Creates (once) and prints the engine suite's virtual environment: vLLM, SGLang, LMCache and Mooncake's
# wheel, exactly as pinned in tests/engines/requirements.lock. It lives outside the clone, keyed by the
# lock file's hash, so a fresh clone with the same lock reuses it and installs nothing.
# Needs the Python package index the first time (several GB); `make test` never calls this.
set -euo pipefail
cd "$(dirname "$0")/.."
lock=tests/engines/requirements.lock
key=$(sha256sum "$lock" | cut -c1-16)
root=${KVTIER_ENGINES_CACHE:-$HOME/.cache/kvtier-engines}
venv=$root/$key
if [[ ! -f $venv/.complete ]]; then
  echo "engines-venv: creating $venv from $lock (first run downloads several GB)" >&2
  rm -rf "$venv"
  mkdir -p "$root"
  # Debian's interpreter: the one build/python's extension modules are compiled for.
  /usr/bin/python3 -m venv "$venv"
  # --no-deps: the lock is already the whole resolved set; pip must not re-resolve the engines'
  # mutually conflicting pins (see requirements.lock's last lines).
  "$venv/bin/python" -m pip install --no-deps --progress-bar off -r "$lock" >&2
  touch "$venv/.complete"
  # Keep only the venv of the current lock.
  find "$root" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} + 2>/dev/null || true
fi
echo "$venv"
