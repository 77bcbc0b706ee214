#!/usr/bin/env bash
# The plugin ABI end to end, as a third party meets it: install kvtier into a temporary prefix,
# build examples/plugin from a copy outside the source tree against the installed headers only
# (once as is, once claiming a wrong ABI version), load both through the connector registry with
# plugin_check, then run the installed `kvtier server` with the plugin as its L2 adapter.
#   plugin_test.sh KVTIER_BUILD_DIR SOURCE_DIR PLUGIN_CHECK NO_ENTRY_SO CXX_COMPILER
# Every process it starts is stopped by PID; the temporary directory is removed on exit.
set -euo pipefail

build=$1 src=$2 checker=$3 no_entry=$4 cxx=$5
cmake=${CMAKE_COMMAND:-cmake}
python=/usr/bin/python3

for f in "$checker" "$no_entry"; do
  [[ -f $f ]] || { echo "FAIL: $f is missing; run cmake --build first" >&2; exit 1; }
done
no_entry=$(realpath "$no_entry")  # kvtier loads plugins by absolute path only

work=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-plugin-test.XXXXXX")
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

step() { echo "== $*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

step "install kvtier into $work/prefix"
"$cmake" --install "$build" --prefix "$work/prefix" > "$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install"; }
headers=$work/prefix/include/kvtier
for h in connectors/{connector.h,connector_base.h,plugin_abi.h} common/{status.h,buffer_span.h}; do
  [[ -f $headers/$h ]] || fail "installed headers lack $h"
done
bin=$work/prefix/bin/kvtier
"$bin" --version > /dev/null || fail "the installed kvtier does not run"
abi=$(sed -n 's/^#define KVTIER_CONNECTOR_ABI_VERSION \([0-9]*\).*/\1/p' \
  "$headers/connectors/plugin_abi.h")
[[ -n $abi ]] || fail "cannot read KVTIER_CONNECTOR_ABI_VERSION from the installed plugin_abi.h"

# A copy, so that nothing in the build can reach into the source tree by a relative path.
cp -r "$src/examples/plugin" "$work/example"

# Two builds, in parallel: the good one finds kvtier with find_package, the wrong-ABI one is
# pointed at the headers directly, so both documented ways are exercised (and both build types:
# the example defaults to Release).
build_example() {  # NAME CMAKE_ARGS...
  local name=$1
  shift
  { "$cmake" -S "$work/example" -B "$work/$name" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_CXX_FLAGS=-Werror "$@" &&
    "$cmake" --build "$work/$name"; } > "$work/$name.log" 2>&1
}
step "build examples/plugin twice (good, and claiming ABI version 999)"
build_example good -DCMAKE_PREFIX_PATH="$work/prefix" & good_pid=$!
build_example wrong_abi -DKVTIER_INCLUDE_DIR="$headers" -DKVTIER_EXAMPLE_ABI_OVERRIDE=999 \
  -DCMAKE_BUILD_TYPE=Debug &
wrong_pid=$!
good_rc=0 wrong_rc=0
wait "$good_pid" || good_rc=$?
wait "$wrong_pid" || wrong_rc=$?
[[ $good_rc == 0 ]] || { cat "$work/good.log"; fail "building the example plugin"; }
[[ $wrong_rc == 0 ]] || { cat "$work/wrong_abi.log"; fail "building the wrong-ABI example"; }
good_so=$work/good/libkvtier_example_plugin.so
wrong_so=$work/wrong_abi/libkvtier_example_plugin.so

# The plugin exports its entry point and nothing of kvtier's, its own or nlohmann_json's (it
# may export standard library instantiations: libstdc++ marks namespace std visible).
nm -D --defined-only "$good_so" | grep -q ' T kvtier_connector_plugin$' ||
  fail "the plugin does not export kvtier_connector_plugin"
leaked=$(nm -DC --defined-only "$good_so" | grep -E 'kvtier::|kvtier_example::|nlohmann::' || true)
[[ -z $leaked ]] || fail "the plugin exports more than its entry point: $leaked"

step "load the plugins through the connector registry"
"$checker" "$good_so" "$wrong_so" "$no_entry"

# --- the server with the plugin as its L2 adapter -------------------------------------------
free_port() {  # below the ephemeral range, as kvtier.server.free_port (which needs _kvtier)
  "$python" -c 'import random, socket
while True:
    s, port = socket.socket(), random.randint(10000, 32767)
    try:
        s.bind(("127.0.0.1", port))
        break
    except OSError:
        s.close()
print(port)'
}
http=$(free_port)
start_server() {  # ADAPTER_JSON STDERR_FILE: starts the installed server in the background
  "$bin" server --port "$(free_port)" --http-port "$http" --l1-size-gb 0.0625 --no-l1-prefault \
    --log-level warn --l2-adapter "$1" 2> "$2" &
  server_pid=$!
}
stop_server() {  # waits (at most 20 s, then SIGKILL) for the server to exit; status in $rc
  for _ in $(seq 200); do
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$server_pid" 2>/dev/null && kill -KILL "$server_pid"
  rc=0
  wait "$server_pid" || rc=$?
  server_pid=""
}

step "start kvtier server with the plugin as L2 adapter"
start_server "{\"type\":\"plugin\",\"path\":\"$good_so\",\"capacity_mb\":8}" "$work/server.err"
status=""
for _ in $(seq 200); do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    cat "$work/server.err" >&2
    fail "server exited at startup"
  fi
  if status=$(curl -sf --max-time 2 "http://127.0.0.1:$http/status"); then break; fi
  sleep 0.1
done
[[ -n $status ]] || { cat "$work/server.err" >&2; fail "server /status did not answer"; }
grep -q '"plugin#0"' <<< "$status" || fail "/status does not name the adapter plugin#0: $status"
kill -TERM "$server_pid"
stop_server
[[ $rc == 0 ]] || { cat "$work/server.err" >&2; fail "server exited with $rc on SIGTERM"; }

step "kvtier server refuses the wrong-ABI plugin at startup"
start_server "{\"type\":\"plugin\",\"path\":\"$wrong_so\"}" "$work/wrong.err"
stop_server  # it should stop by itself at once
[[ $rc != 0 ]] || fail "server with a wrong-ABI plugin exited 0"
[[ $rc != 137 ]] || fail "server with a wrong-ABI plugin was still running after 20 s"
if ! grep -q "ABI version 999" "$work/wrong.err" ||
   ! grep -q "has version $abi" "$work/wrong.err"; then
  cat "$work/wrong.err" >&2
  fail "the server's error does not name both ABI versions"
fi
echo "PASS"
