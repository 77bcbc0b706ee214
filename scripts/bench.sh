#!/usr/bin/env bash
# `make bench`: the server benchmark with default settings. Prints the table, then repeats the
# run with --json and saves it to $BUILD/bench-server.json (BUILD defaults to build). Extra
# arguments go to both runs, e.g. scripts/bench.sh --workers 1. Fails if either run fails,
# which includes any byte that came back wrong.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD:-build}"
bin="$build/kvtier"
if [[ ! -x "$bin" ]]; then
  echo "error: $bin not found; run 'make build' first" >&2
  exit 1
fi

"$bin" bench server "$@"

json="$build/bench-server.json"
# Written to a temporary name first, so a failed run never leaves a half-written report.
"$bin" bench server --json "$@" > "$json.tmp"
mv "$json.tmp" "$json"
echo "wrote $json" >&2
