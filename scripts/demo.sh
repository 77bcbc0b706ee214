#!/usr/bin/env bash
# `make run`: replays a small chat workload against a local kvtier server and verifies every
# byte the cache returns; then replays a conversation trace the repository generates (Mooncake's
# format) through `kvtier bench server --trace`, which estimates the TTFT it saves and plots it.
# Expects `make build` to have produced $BUILD/kvtier and $BUILD/python.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
if [[ ! -x "$BUILD/kvtier" || ! -d "$BUILD/python/kvtier" ]]; then
  echo "demo.sh: $BUILD/kvtier or $BUILD/python is missing; run 'make build' first" >&2
  exit 1
fi
export PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}"
export KVTIER_BIN="$BUILD/kvtier"
/usr/bin/python3 python/examples/demo_workload.py "$@"

demo="$BUILD/demo"
mkdir -p "$demo"
/usr/bin/python3 python/examples/make_trace.py --out "$demo/trace.jsonl"
echo
echo "== replay of $(wc -l < "$demo/trace.jsonl") requests of a generated conversation trace ($demo/trace.jsonl)"
"$BUILD/kvtier" bench server --trace "$demo/trace.jsonl" --l1-size-gb 0.25 --plot "$demo/replay.png"
