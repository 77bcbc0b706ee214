#!/usr/bin/env bash
# `make run`: replays a small chat workload against a local kvtier server and verifies every
# byte the cache returns. Expects `make build` to have produced $BUILD/kvtier and $BUILD/python.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
if [[ ! -x "$BUILD/kvtier" || ! -d "$BUILD/python/kvtier" ]]; then
  echo "demo.sh: $BUILD/kvtier or $BUILD/python is missing; run 'make build' first" >&2
  exit 1
fi
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
export KVTIER_BIN="$BUILD/kvtier"
exec /usr/bin/python3 python/examples/demo_workload.py "$@"
