#!/usr/bin/env bash
# `pip install` as a user meets it: builds the kvtier wheel from this source tree (setup.py
# drives CMake; KVTIER_CMAKE_BUILD_DIR points it at the test build, so nothing compiles twice)
# and the mooncake compatibility wheel, offline with Debian's pip, setuptools and wheel; installs
# both into a fresh venv; then, from a folder outside the source tree and without PYTHONPATH or
# KVTIER_BIN, runs `kvtier server` with `kvtier ctl` against it, and `mooncake_master` and
# `kvtier node` from the venv's bin with a dummy client and an embedded client through
# `mooncake.store`: only the installed artefacts are used.
#   wheel_test.sh SOURCE_DIR CMAKE_BUILD_DIR
# Every process it starts is stopped by PID; the temporary directory is removed on exit.
set -euo pipefail

src=$(realpath "$1") build=$(realpath "$2")
python=/usr/bin/python3
work=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-wheel-test.XXXXXX")
pids=()
cleanup() {
  for p in "${pids[@]}"; do
    kill -TERM "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
step() { echo "== $*"; }
fail() {
  echo "FAIL: $*" >&2
  for f in "$work"/*.log; do [[ -f $f ]] && { echo "--- $f" >&2; cat "$f" >&2; }; done
  exit 1
}

step "build the wheels (offline, no build isolation)"
# setuptools writes its own build/ and *.egg-info into the tree it builds: build from a copy of
# the sources (without the CMake build folders) so the checkout stays clean.
tree="$work/src"
mkdir -p "$tree"
tar -C "$src" --exclude=./build --exclude=./.git -cf - . | tar -C "$tree" -xf -
# The two front ends of setuptools' PEP 517 backend: python3 -m build, and pip (as `pip install .`).
KVTIER_CMAKE_BUILD_DIR="$build" "$python" -m build --wheel --no-isolation -o "$work/dist" "$tree" \
  > "$work/wheel.log" 2>&1 || fail "kvtier wheel"
"$python" -m pip wheel --no-build-isolation --no-deps --no-index -q -w "$work/dist" \
  "$tree/python/mooncake_compat" >> "$work/wheel.log" 2>&1 || fail "compat wheel"
ls -l "$work/dist"
wheel=$(ls "$work"/dist/kvtier-*.whl)
[[ $wheel == *linux_*.whl ]] || fail "not a platform wheel: $wheel"
size=$(stat -c %s "$wheel")
((size < 50 * 1024 * 1024)) || fail "the wheel is $size bytes (debug info left in?)"

step "install both into a fresh venv"
"$python" -m venv "$work/venv"
venv="$work/venv/bin"
"$venv/pip" install --no-index --no-deps -q "$work"/dist/*.whl > "$work/install.log" 2>&1 ||
  fail "pip install"

cd "$work"  # nothing of the source tree is importable from here
unset PYTHONPATH KVTIER_BIN
"$venv/python" -c 'import kvtier, sys; assert kvtier.__file__.startswith(sys.prefix), kvtier.__file__'
"$venv/python" -c 'import kvtier.integrations, sys; assert kvtier.integrations.__file__.startswith(sys.prefix)' ||
  fail "the kvtier.integrations package"
"$venv/kvtier" --version | grep -q . || fail "the kvtier command"

free_port() { "$venv/python" -c 'from kvtier.server import free_port; print(free_port())'; }

step "kvtier server from the venv, kvtier ctl against it"
port=$(free_port) admin=$(free_port)
"$venv/kvtier" server --port="$port" --http-port="$admin" --l1-size-gb=0.0625 > "$work/server.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  "$venv/kvtier" ctl --server "127.0.0.1:$port" ping > "$work/ping.log" 2>&1 && break
  sleep 0.2  # polls the server's readiness; the loop ends when it answers
done
"$venv/kvtier" ctl --server "127.0.0.1:$port" ping > "$work/ping.log" 2>&1 || fail "kvtier ctl ping"
"$venv/kvtier" ctl --http "127.0.0.1:$admin" status > "$work/status.log" 2>&1 || fail "kvtier ctl status"

step "mooncake_master + kvtier node from the venv, clients through mooncake.store"
rpc=$(free_port) http=$(free_port) node=$(free_port)
"$venv/mooncake_master" --rpc_port="$rpc" --rpc_address=127.0.0.1 --metrics_port="$http" \
  > "$work/master.log" 2>&1 &
pids+=($!)
"$venv/kvtier" node --port="$node" --master_server_address="127.0.0.1:$rpc" \
  --global_segment_size=16MB --no-prefault > "$work/node.log" 2>&1 &
pids+=($!)
"$venv/python" - "$rpc" "$http" "$node" "$work/node.log" <<'PY' || fail "clients"
import sys, urllib.request
from pathlib import Path
from kvtier._process import wait_until
from mooncake.store import MooncakeDistributedStore, ReplicateConfig
rpc, http, node, node_log = sys.argv[1:]
wait_until(lambda: "kvtier node " in Path(node_log).read_text(errors="replace"), 20, "the node")
dummy = MooncakeDistributedStore()
wait_until(lambda: dummy.setup_dummy(0, 1 << 20, f"127.0.0.1:{node}") == 0, 20, "setup_dummy")
wait_until(lambda: dummy.put("wheel-key", b"from the installed wheel", ReplicateConfig()) == 0,
           20, "a put")
embedded = MooncakeDistributedStore()
assert embedded.setup("127.0.0.1", "P2PHANDSHAKE", "8MB", "8MB", "tcp", "",
                      f"127.0.0.1:{rpc}") == 0
assert embedded.get("wheel-key") == b"from the installed wheel"
assert embedded.put("wheel-key-2", b"embedded") == 0
assert dummy.get("wheel-key-2") == b"embedded"
segments = urllib.request.urlopen(f"http://127.0.0.1:{http}/get_all_segments").read().decode()
assert f"127.0.0.1:{node}" in segments.splitlines(), segments
embedded.close()
dummy.close()
print("clients ok")
PY
echo "PASS"
