#!/usr/bin/env bash
# `bench l2` against the `store` connector (the kvtier store as the cache server's L2): starts a
# `kvtier master` and a `kvtier node` on free loopback ports (stopped by PID on exit), then runs
#  1. lanes: a shared pool of 4 threads against per-op lanes lookup 1 / retrieve 1 / store 2,
#     both with the L1-like buffers preregistered (the seed's experiment, 1024 keys x 1 MiB,
#     4 stores per round);
#  2. memory: preregistered against staged (preregister_l1_memory false), both with a shared
#     pool of 4 threads (so that phase 2 has 4 loads or stores running at once);
# each as a table and as JSON in $BUILD/bench-l2-store-{lanes,memory}.json. Extra arguments go to
# every `bench l2` run (e.g. --keys 256). Called by scripts/bench.sh; runs alone as well.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD:-build}"
bin="$build/kvtier"
if [[ ! -x "$bin" ]]; then
  echo "error: $bin not found; run 'make build' first" >&2
  exit 1
fi

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

dir="$(mktemp -d "${TMPDIR:-/tmp}/kvtier-bench-store-l2.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

master_port="$(free_port)"
master_http="$(free_port)"
node_port="$(free_port)"
node_http="$(free_port)"
# Leases of 1 s instead of 5: the bench removes what it stored right after reading it, and a
# remove waits (within its 5 s deadline) until the readers' leases have ended.
"$bin" master --port "$master_port" --http-port "$master_http" --default-kv-lease-ttl-ms 1000 \
  > "$dir/master.log" 2>&1 &
pids+=($!)
# Phase 1 keeps up to --keys values at once (1 GiB by default); room for both phases' stragglers.
"$bin" node --master "127.0.0.1:$master_port" --port "$node_port" --http-port "$node_http" \
  --global-segment-size "${STORE_SEGMENT_SIZE:-3GB}" > "$dir/node.log" 2>&1 &
pids+=($!)
for _ in $(seq 300); do
  if /usr/bin/python3 - "$node_http" <<'PY' 2>/dev/null; then break; fi
import json, sys, urllib.request
status = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/status", timeout=1))
sys.exit(0 if status.get("mounted") else 1)
PY
  for pid in "${pids[@]}"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "error: the store did not start:" >&2
      cat "$dir/master.log" "$dir/node.log" >&2
      exit 1
    fi
  done
  sleep 0.1
done

store="\"type\":\"store\",\"server_address\":\"127.0.0.1:$node_port\""
per_op="\"per_op_workers\":{\"lookup\":1,\"retrieve\":1,\"store\":2}"

# Runs `bench l2` twice with the same arguments: the table, then --json into $1.
run_l2() {
  local out="$1"
  shift
  "$bin" bench l2 "$@"
  "$bin" bench l2 "$@" --json > "$out.tmp"
  mv "$out.tmp" "$out"
  echo "wrote $out" >&2
}

# --warm-up: the node maps the bench's buffers as it maps a server's L1; on this VM the first
# touch of each page through a new mapping costs ~9 us (docs/BENCHMARKS.md), which a server's
# long-lived L1 pays once. One untimed pass pays it here before anything is timed.
run_l2 "$build/bench-l2-store-lanes.json" --warm-up "$@" \
  --adapter "{$store,\"num_workers\":4}" --adapter "{$store,$per_op}"
run_l2 "$build/bench-l2-store-memory.json" --warm-up "$@" \
  --adapter "{$store,\"num_workers\":4}" \
  --adapter "{$store,\"num_workers\":4,\"preregister_l1_memory\":false}"
