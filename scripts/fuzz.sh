#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets in tests/fuzz with clang and runs each one.
#   scripts/fuzz.sh [SECONDS]      run every target for SECONDS (default 60)
#   scripts/fuzz.sh --smoke        ~10 s per target; the fuzz_smoke ctest. Exits 77 (ctest SKIP)
#                                  when clang or libFuzzer is not installed.
#   scripts/fuzz.sh --make-corpus  regenerate the seed corpus in tests/fuzz/corpus (commit it;
#                                  the resp and trace seeds are hand-written files)
# Output goes to $BUILD/fuzz (BUILD defaults to build). Each run works on a scratch copy of the
# seed corpus, so the repository is never written to. Exits non-zero if any target crashes or a
# sanitizer reports; the offending input is saved under $BUILD/fuzz/artifacts/<target>/.
# FUZZ_CXX picks the compiler (default clang++-14; clang++-19 works too).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

mode=run
seconds=60
case "${1:-}" in
  "") ;;
  --smoke) mode=smoke; seconds=10 ;;
  --make-corpus) mode=corpus ;;
  -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
  *)
    if [[ ! "$1" =~ ^[0-9]+$ ]] || (( $1 == 0 )); then
      echo "usage: $0 [SECONDS | --smoke | --make-corpus]" >&2
      exit 2
    fi
    seconds="$1"
    ;;
esac

build="${BUILD:-build}"
[[ "$build" = /* ]] || build="$root/$build"
out="$build/fuzz"
cxx="${FUZZ_CXX:-clang++-14}"
# FUZZ_TARGETS picks some (e.g. "resp store"); all by default.
read -ra targets <<< "${FUZZ_TARGETS:-body handoff store connectors resp trace lmcache}"

missing() {  # missing WHAT: no toolchain is a skip for the smoke test, an error otherwise
  echo "error: $1 not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
  [[ "$mode" == smoke ]] && exit 77
  exit 1
}
command -v "$cxx" > /dev/null || missing "$cxx"
# -print-file-name echoes the bare name back when the runtime library is not installed.
[[ "$("$cxx" -print-file-name=libclang_rt.fuzzer-x86_64.a)" == /* ]] || missing "libFuzzer"

version="$(sed -n 's/^project(kvtier VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
# The defines msgpackc-cxx and fmt give kvt_wire in CMake: the fuzz build must see the same API.
cxxflags=(-std=c++20 -g -O1 -fno-omit-frame-pointer -Wall -Wextra -Isrc
          "-DKVTIER_VERSION=\"${version:-0.0.0}\"" -DMSGPACK_DEFAULT_API_VERSION=3
          -DBOOST_ALL_NO_LIB)
read -ra fmt_cflags <<< "$(pkg-config --cflags fmt)"
cxxflags+=("${fmt_cflags[@]}")
# shellcheck disable=SC2054  # the commas belong to the flag
sanitize=(-fsanitize=address,undefined -fno-sanitize-recover=all)
# Only what the decoders link against; hashing/logging are not needed and would pull in xxhash
# and spdlog (OpenSSL is needed: the master port's records are sealed with AES-GCM).
lib_srcs=(src/wire/{body_codec,fd_passing,frames,messages,protocol}.cc src/common/{status,printable}.cc
          src/store/protocol/{master_protocol,master_protocol_repairs,master_columns}.cc
          src/store/protocol/dummy_protocol.cc src/store/protocol/store_errors.cc
          src/store/transport/data_plane_protocol.cc src/store/transport/rpc_records.cc
          src/wire/secret_channel.cc src/connectors/fs_object_file.cc
          src/connectors/adapter_config.cc src/connectors/resp_reply_reader.cc
          src/connectors/resp_errors.cc src/bench/server/trace_file.cc
          src/bench/server/trace_prompts.cc src/bench/common/data_pattern.cc
          src/server/lmcache_codec.cc src/server/lmcache_args.cc)
read -ra libs <<< "$(pkg-config --libs fmt libxxhash libcrypto)"
mkdir -p "$out/obj"

if [[ "$mode" == corpus ]]; then
  "$cxx" "${cxxflags[@]}" tests/fuzz/make_corpus.cc "${lib_srcs[@]}" "${libs[@]}" \
    -o "$out/make_corpus"
  dirs=(tests/fuzz/corpus/{body,handoff,store,connectors,lmcache})
  mkdir -p "${dirs[@]}"
  "$out/make_corpus" "${dirs[@]}"
  ls -l "${dirs[@]}"
  exit 0
fi

# --- build: objects are rebuilt when a dependency or the flags change ---
objflags=("${cxxflags[@]}" "${sanitize[@]}" -fsanitize=fuzzer-no-link)
stamp="$out/obj/flags"
flags_now="$cxx ${objflags[*]}"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$flags_now" ]]; then
  rm -f "$out"/obj/*.o
  printf '%s' "$flags_now" > "$stamp"
fi

stale() {  # stale OBJ DEPFILE: true if OBJ is missing or older than anything it includes
  local obj="$1" dep="$2" f
  [[ -f "$obj" && -f "$dep" ]] || return 0
  # shellcheck disable=SC2013  # a depfile is a list of words, not lines
  for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$dep"); do
    [[ "$f" -nt "$obj" ]] && return 0
  done
  return 1
}

# Through ccache when it is installed, with the cache and settings CMakeLists.txt gives it.
launcher=()
command -v ccache > /dev/null &&
  launcher=(env "CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/kvtier-ccache}" CCACHE_MAXSIZE=10G
            "CCACHE_BASEDIR=$root" CCACHE_NOHASHDIR=1 ccache)
compile() {  # compile SRC OBJ
  "${launcher[@]}" "$cxx" "${objflags[@]}" -MMD -MF "${2%.o}.d" -c "$1" -o "$2"
}

objs=()
pids=()
for src in "${lib_srcs[@]}" "${targets[@]/#/tests/fuzz/}"; do
  [[ "$src" == *.cc ]] || src="${src}_fuzzer.cc"
  obj="$out/obj/$(echo "${src%.cc}" | tr / _).o"
  [[ "$src" == tests/fuzz/* ]] || objs+=("$obj")
  if stale "$obj" "${obj%.o}.d"; then
    echo "compile $src" >&2
    compile "$src" "$obj" &
    pids+=($!)
  fi
done
for pid in "${pids[@]}"; do
  wait "$pid" || { echo "error: fuzz build failed" >&2; exit 1; }
done

for t in "${targets[@]}"; do
  obj="$out/obj/tests_fuzz_${t}_fuzzer.o"
  bin="$out/${t}_fuzzer"
  if [[ ! -x "$bin" || "$obj" -nt "$bin" || -n "$(find "${objs[@]}" -newer "$bin")" ]]; then
    "$cxx" "${sanitize[@]}" -fsanitize=fuzzer "$obj" "${objs[@]}" "${libs[@]}" -o "$bin"
  fi
done

# --- run ---
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
failed=0
for t in "${targets[@]}"; do
  scratch="$(mktemp -d "$out/corpus-$t.XXXXXX")"
  cp tests/fuzz/corpus/"$t"/* "$scratch"/ 2> /dev/null || true
  mkdir -p "$out/artifacts/$t"
  args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$out/artifacts/$t/")
  [[ -f "tests/fuzz/$t.dict" ]] && args+=(-dict="tests/fuzz/$t.dict")
  log="$out/$t.log"
  rc=0
  "$out/${t}_fuzzer" "${args[@]}" "$scratch" > "$log" 2>&1 || rc=$?
  execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)"
  corpus="$(find "$scratch" -type f | wc -l)"
  printf '%-10s %10s execs (%s/s) in %ss, %s, corpus %s files, exit %s\n' \
    "$t" "${execs:-?}" "${rate:-?}" "$seconds" "${cov:-cov: ?}" "$corpus" "$rc"
  if (( rc != 0 )); then
    failed=1
    echo "---- $t FAILED; log: $log; inputs: $out/artifacts/$t/" >&2
    tail -n 60 "$log" >&2
  fi
  rm -rf "$scratch"
done
exit "$failed"
