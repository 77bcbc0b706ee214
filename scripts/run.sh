#!/usr/bin/env bash
# `make run`: installs what the demo needs, builds the binary and the Python module, runs the demo
# (scripts/demo.sh). The package and compiler output goes to logs under $BUILD/logs, so a newcomer
# reads one line per step and the demo's summary; a step that fails prints its log's tail.
# A build tree this creates is unity-built with line tables only (KVT_UNITY in CMakeLists.txt):
# about half the compile of the default tree, which matters on a machine that never built kvtier.
# A tree that exists keeps its own settings. Arguments go to scripts/demo.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build}"
JOBS="${JOBS:-$(nproc)}"
read -r -a cmake_flags <<< "${CMAKE_FLAGS:--DPython_EXECUTABLE=/usr/bin/python3 -DCMAKE_BUILD_TYPE=RelWithDebInfo}"
logs="$BUILD/logs"
mkdir -p "$logs"

step() {  # step WHAT LOG COMMAND...: one line for the step, its output in LOG
  local what="$1" log="$2" start=$SECONDS
  shift 2
  printf '%s ... ' "$what"
  if "$@" > "$log" 2>&1; then
    echo "done in $((SECONDS - start)) s"
  else
    echo "failed after $((SECONDS - start)) s; the end of $log:"
    tail -40 "$log"
    exit 1
  fi
}

configure() {
  [[ -f "$BUILD/CMakeCache.txt" ]] && return 0
  cmake -S . -B "$BUILD" "${cmake_flags[@]}" -DKVT_UNITY=ON \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
}

build() {
  configure
  cmake --build "$BUILD" -j "$JOBS" --target kvtier _kvtier
}

step "packages the demo needs (scripts/install-deps.sh run)" "$logs/deps.log" \
  scripts/install-deps.sh run
step "compiling kvtier and its Python module (a few minutes the first time)" "$logs/build.log" build
BUILD="$BUILD" scripts/demo.sh "$@"
