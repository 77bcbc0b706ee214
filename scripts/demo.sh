#!/usr/bin/env bash
# `make run`: replays a small chat workload against a local kvtier server and verifies every
# byte the cache returns; then replays a conversation trace the repository generates (Mooncake's
# format) through `kvtier bench server --trace`, which verifies its bytes too, estimates the TTFT
# it saves and plots it. Prints a short summary (python/examples/demo_summary.py); every number
# of the replay is kept in $BUILD/demo/replay.json. Any byte that comes back wrong fails it.
# On a machine with a GPU, `kvtier bench gpu` first measures the host-to-GPU path the estimate
# charges a hit's bytes at; elsewhere the estimate states the PCIe default it uses.
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

copy_gbps=()
gbps_source=""
if command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1; then
  # The GPU path's RETRIEVE rate, measured here; without it the replay states its default.
  if "$BUILD/kvtier" bench gpu --json --rounds 2 > "$demo/gpu.json" 2> "$demo/gpu.err"; then
    gbps="$(/usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["retrieve_gbps"])' \
      < "$demo/gpu.json")"
    copy_gbps=(--gpu-copy-gbps "$gbps")
    gbps_source="measured by kvtier bench gpu"
  fi
fi

# The replay's own messages (the plot's path) go to a log, shown if it fails.
if ! "$BUILD/kvtier" bench server --trace "$demo/trace.jsonl" --l1-size-gb 0.25 --json \
    --plot "$demo/replay.png" "${copy_gbps[@]}" > "$demo/replay.json" 2> "$demo/replay.log"; then
  cat "$demo/replay.log" >&2
  [[ -s "$demo/replay.json" ]] && /usr/bin/python3 python/examples/demo_summary.py \
    "$demo/replay.json" --plot "$demo/replay.png" || true
  echo "demo.sh: the trace replay failed (above; log in $demo/replay.log)" >&2
  exit 1
fi
/usr/bin/python3 python/examples/demo_summary.py "$demo/replay.json" --plot "$demo/replay.png" \
  --gbps-source "$gbps_source"
cat <<NEXT
dashboard: every kvtier process serves one on its HTTP port; try $BUILD/kvtier server, then
  http://127.0.0.1:8080/dashboard/
next:  make test              run the unit, integration and Python tests
       make bench             throughput against this machine's memcpy and network, with the goals
       docs/integrations.md   kvtier under vLLM, SGLang or LMCache
NEXT
