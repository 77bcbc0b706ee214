#!/usr/bin/env bash
# `make bench`: the server benchmark with default settings. Prints the table, then repeats the
# run with --json and saves it to $BUILD/bench-server.json (BUILD defaults to build). Extra
# arguments go to both server runs, e.g. scripts/bench.sh --workers 1. Fails if either run fails,
# which includes any byte that came back wrong.
#
# Then `bench l2` for the fs connector (a temporary directory under $TMPDIR, which should be on a
# disk, not tmpfs) and the resp connector (a redis-server started here on a free port and
# stopped by PID on exit), comparing a shared pool against per-op lanes for resp. Reports go to
# $BUILD/bench-l2-fs.json and $BUILD/bench-l2-resp.json. BENCH_L2_ARGS adds options to both
# (e.g. BENCH_L2_ARGS="--keys 256"). Without /usr/bin/redis-server the resp part is skipped.
# Between fs and resp, scripts/bench_store_l2.sh runs `bench l2` against the store connector
# (a master and a node started on free ports): $BUILD/bench-l2-store-{lanes,memory}.json.
#
# Between the two, `bench store` (it starts its own master, nodes and redis-server) prints its
# table and writes its JSON to $BUILD/bench-store.json in the same run. BENCH_STORE_ARGS adds
# options (e.g. BENCH_STORE_ARGS="--quick"). Then bench/store_python_api.py: Mooncake's batch
# calls through kvtier.store against the same run's memcpy, and bench/sglang_backend.py: the
# SGLang HiCache backend's page backup and prefetch, and bench/vllm_connector.py: the vLLM
# connector's saves and loads through a kvtier server, each against the same run's memcpy.
# Then `bench master` (the master holding 1M objects: memory per object, batched key ops/s) and
# bench/store_rereplication.py (copies after a node kill, against raw TCP), each printed and written
# to $BUILD/bench-master.json and $BUILD/bench-rereplication.json; the Python
# benches write theirs (--json-out) to $BUILD/bench-{store-python-api,sglang-backend,
# vllm-connector}.json in the same run.
#
# Every report is stamped (bench/bench_report.py) with the machine (CPUs, model, memory, kernel,
# date) and the command that made it. At the end bench/markdown.py turns the $BUILD/bench-*.json
# reports into one markdown table per component, the shape of docs/BENCHMARKS.md's "Current
# results", written to $BUILD/bench-tables.md; with --markdown (given anywhere; not passed on to
# the server runs) they are printed as well. With --update-docs (likewise) the same tables also
# replace the marked region of docs/BENCHMARKS.md (bench/markdown.py --write-doc); without it the
# doc is left alone, so a run on another machine does not rewrite the project's numbers.
set -euo pipefail
cd "$(dirname "$0")/.."

print_tables=0
update_docs=0
server_args=()
for arg in "$@"; do
  case "$arg" in
    --markdown) print_tables=1 ;;
    --update-docs) update_docs=1 ;;
    *) server_args+=("$arg") ;;
  esac
done
set -- "${server_args[@]+"${server_args[@]}"}"

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

# Adds the machine block's missing keys and the command to the report in $1.
stamp() {
  local words
  read -r -a words <<< "$2" # one space between words: an empty argument list leaves none
  /usr/bin/python3 bench/bench_report.py stamp "$1" --command "${words[*]}"
}
stamp "$json" "$bin bench server $*"

# --- bench store -------------------------------------------------------------------------------
read -r -a store_args <<< "${BENCH_STORE_ARGS:-}"
"$bin" bench store "${store_args[@]+"${store_args[@]}"}" --json-out "$build/bench-store.json"
stamp "$build/bench-store.json" "$bin bench store ${BENCH_STORE_ARGS:-}"
echo "wrote $build/bench-store.json" >&2

# --- the Python store API (Mooncake's calls) against memcpy ---------------------------------
for py in store_python_api sglang_backend vllm_connector; do
  PYTHONPATH="$build/python" KVTIER_BIN="$bin" /usr/bin/python3 "bench/$py.py" \
    --json-out "$build/bench-${py//_/-}.json"
  echo "wrote $build/bench-${py//_/-}.json" >&2
done

# --- the store master at size, and re-replication --------------------------------------------
"$bin" bench master --objects 1000000 --json-out "$build/bench-master.json"
stamp "$build/bench-master.json" "$bin bench master --objects 1000000"
PYTHONPATH="$build/python" KVTIER_BIN="$bin" /usr/bin/python3 bench/store_rereplication.py \
  --json-out "$build/bench-rereplication.json"
stamp "$build/bench-rereplication.json" "/usr/bin/python3 bench/store_rereplication.py"
echo "wrote $build/bench-master.json and $build/bench-rereplication.json" >&2

# --- bench l2 ---------------------------------------------------------------------------------
read -r -a l2_args <<< "${BENCH_L2_ARGS:-}"
l2_dir=""
redis_pid=""
cleanup() {
  if [[ -n "$redis_pid" ]]; then
    kill "$redis_pid" 2>/dev/null || true
    wait "$redis_pid" 2>/dev/null || true
  fi
  if [[ -n "$l2_dir" ]]; then rm -rf "$l2_dir"; fi
}
trap cleanup EXIT

l2_dir="$(mktemp -d "${TMPDIR:-/tmp}/kvtier-bench-l2.XXXXXX")"

# Runs `bench l2` twice with the same arguments: the table, then --json into $1.
run_l2() {
  local out="$1"
  shift
  "$bin" bench l2 "$@" "${l2_args[@]}"
  "$bin" bench l2 "$@" "${l2_args[@]}" --json > "$out.tmp"
  mv "$out.tmp" "$out"
  stamp "$out" "$bin bench l2 $* ${BENCH_L2_ARGS:-}"
  echo "wrote $out" >&2
}

run_l2 "$build/bench-l2-fs.json" --adapter "{\"type\":\"fs\",\"path\":\"$l2_dir/fs\"}"

# The store connector: lanes and memory modes against a master + node it starts itself.
BUILD="$build" scripts/bench_store_l2.sh "${l2_args[@]+"${l2_args[@]}"}"
for mode in lanes memory; do
  stamp "$build/bench-l2-store-$mode.json" "scripts/bench_store_l2.sh ${BENCH_L2_ARGS:-} ($mode)"
done

# The tables of every report there is, into $build/bench-tables.md (printed with --markdown).
write_tables() {
  /usr/bin/python3 bench/markdown.py "$build" > "$build/bench-tables.md.tmp"
  mv "$build/bench-tables.md.tmp" "$build/bench-tables.md"
  echo "wrote $build/bench-tables.md" >&2
  if ((print_tables)); then cat "$build/bench-tables.md"; fi
  if ((update_docs)); then
    /usr/bin/python3 bench/markdown.py --write-doc docs/BENCHMARKS.md "$build"
  fi
}

if [[ ! -x /usr/bin/redis-server ]]; then
  echo "skipping bench l2 for resp: /usr/bin/redis-server not found" >&2
  write_tables
  exit 0
fi
port="$(PYTHONPATH="$build/python" /usr/bin/python3 -c 'from kvtier.server import free_port; print(free_port())')"
/usr/bin/redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$l2_dir" > "$l2_dir/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 100); do
  if /usr/bin/redis-cli -p "$port" ping > /dev/null 2>&1; then break; fi
  if ! kill -0 "$redis_pid" 2>/dev/null; then
    echo "error: redis-server did not start:" >&2
    cat "$l2_dir/redis.log" >&2
    exit 1
  fi
  sleep 0.1
done

run_l2 "$build/bench-l2-resp.json" \
  --adapter "{\"type\":\"resp\",\"port\":$port,\"num_workers\":4}" \
  --adapter "{\"type\":\"resp\",\"port\":$port,\"per_op_workers\":{\"lookup\":1,\"retrieve\":1,\"store\":2}}"
write_tables
