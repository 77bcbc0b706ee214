#!/usr/bin/env bash
# Installs the Debian packages one purpose needs: `run` (build kvtier and run `make run`'s demo;
# the default), `test` (everything `make test`, `make bench` and `make test-engines` use: test
# libraries, Redis, etcd, sanitizers, Chromium for the dashboard test, ...), `fuzz`.
# Idempotent: packages already present are skipped, so a second run costs one dpkg query.
set -euo pipefail
purpose=${1:-run}

run_packages=(
  build-essential cmake pkg-config git ccache
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev nlohmann-json3-dev libcli11-dev
  libspdlog-dev libfmt-dev libxxhash-dev libssl-dev libhiredis-dev libcpp-httplib-dev
  pybind11-dev python3-dev python3-numpy gnuplot-nox fonts-dejavu-core
)
test_packages=(
  libgtest-dev libgmock-dev python3-pytest python3-zmq python3-msgpack python3-yaml
  python3-pip python3-setuptools python3-wheel python3-venv python3-build python3-torch
  redis-server etcd-server clang-14 libclang-rt-14-dev clang-format curl jq iproute2 nftables
  util-linux chromium prometheus
)
fuzz_packages=(clang-14 libclang-rt-14-dev)

case "$purpose" in
  run) packages=("${run_packages[@]}") ;;
  test) packages=("${run_packages[@]}" "${test_packages[@]}") ;;
  fuzz) packages=("${run_packages[@]}" "${fuzz_packages[@]}") ;;
  *) echo "usage: $0 [run|test|fuzz]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps ($purpose): all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps ($purpose): installing ${missing[*]}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
