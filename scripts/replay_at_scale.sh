#!/usr/bin/env bash
# Issue 17 item 5: both Mooncake traces of ../shared/mooncake_traces (or $TRACES), their full
# length, replayed by `kvtier bench server --trace` with L1 alone at several sizes, with L1 + fs
# and L1 + store, back to back and paced. One JSON summary and one plot per run in $OUT
# (default build/replay-scale), then a markdown table of them all (scripts/replay_table.py).
# Objects are kept small (64 KiB per 512-token trace block) so the working sets fit this machine;
# the TTFT estimate re-prices hits at the model's KV size (docs/BENCHMARKS.md).
# Takes ~10-20 minutes on 2 cores. Not part of `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."

build="${BUILD:-build}"
bin="$build/kvtier"
traces="${TRACES:-../shared/mooncake_traces}"
out="${OUT:-$build/replay-scale}"
speedup="${SPEEDUP:-20}"  # paced runs: trace time / this
[[ -x "$bin" ]] || { echo "error: $bin not found; run 'make build' first" >&2; exit 1; }
mkdir -p "$out"

free_port() {
  /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
work="$(mktemp -d "${TMPDIR:-/tmp}/kvtier-replay-scale.XXXXXX")"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# The store for the L1 + store runs: one master, one node with a segment of $STORE_SEGMENT_SIZE.
master_port="$(free_port)"
node_port="$(free_port)"
node_http="$(free_port)"
"$bin" master --port "$master_port" --http-port "$(free_port)" > "$work/master.log" 2>&1 &
pids+=($!)
"$bin" node --master "127.0.0.1:$master_port" --port "$node_port" --http-port "$node_http" \
  --global-segment-size "${STORE_SEGMENT_SIZE:-6GB}" > "$work/node.log" 2>&1 &
pids+=($!)
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$node_http/status" | grep -q '"mounted": true' && break
  sleep 0.1
done
curl -sf "http://127.0.0.1:$node_http/status" | grep -q '"mounted": true' ||
  { echo "error: the store did not start" >&2; cat "$work/master.log" "$work/node.log" >&2; exit 1; }

shape=(--chunk-size 16 --block-tokens 16 --trace-tokens-per-id 16 --layers 2 --bytes-per-token 1024
       --trace-requests 0)
per_op='"per_op_workers":{"lookup":1,"retrieve":1,"store":2}'

# run NAME TRACE L1_GB TIER SPEEDUP
run() {
  local name="$1" trace="$2" l1="$3" tier="$4" pace="$5" adapter=()
  case "$tier" in
    fs) rm -rf "$work/fs"; mkdir -p "$work/fs"
        adapter=("--server-arg=--l2-adapter={\"type\":\"fs\",\"path\":\"$work/fs\",$per_op}") ;;
    store) adapter=("--server-arg=--l2-adapter={\"type\":\"store\",\"server_address\":\"127.0.0.1:$node_port\",$per_op}") ;;
  esac
  echo "== $name: $(basename "$trace"), L1 $l1 GiB, tier $tier, speedup $pace" >&2
  "$bin" bench server --json "${shape[@]}" --trace "$trace" --l1-size-gb "$l1" \
    --trace-speedup "$pace" "${adapter[@]}" --plot "$out/$name.png" > "$out/$name.json.tmp"
  mv "$out/$name.json.tmp" "$out/$name.json"
}

conv="$traces/conversation_trace.jsonl"
syn="$traces/synthetic_trace.jsonl"
# L1 alone from 1 GiB to the working set (conversation 11.2 GiB, synthetic 2.7 GiB at 64 KiB per block).
for gb in 1 2 4 8 12; do run "conv-l1-${gb}g" "$conv" "$gb" l1 0; done
for gb in 1 2 3; do run "syn-l1-${gb}g" "$syn" "$gb" l1 0; done
# A 1 GiB L1 with an L2 behind it.
for tier in fs store; do
  run "conv-l1-1g-$tier" "$conv" 1 "$tier" 0
  run "syn-l1-1g-$tier" "$syn" 1 "$tier" 0
done
# Paced at trace time / $speedup.
run "conv-l1-1g-fs-paced" "$conv" 1 fs "$speedup"
run "syn-l1-1g-fs-paced" "$syn" 1 fs "$speedup"
(cd "$out" && /usr/bin/python3 "$OLDPWD/scripts/replay_table.py" conv-l1-{1,2,4,8,12}g.json conv-l1-1g-{fs,store,fs-paced}.json syn-l1-{1,2,3}g.json syn-l1-1g-{fs,store,fs-paced}.json) | tee "$out/table.md"
