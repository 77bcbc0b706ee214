#!/usr/bin/env bash
# Installs every Debian package that building, testing and benchmarking kvtier needs.
# Idempotent: packages already present are skipped, so a second run costs one dpkg query.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libzmq3-dev cppzmq-dev libmsgpack-cxx-dev nlohmann-json3-dev libcli11-dev
  libspdlog-dev libfmt-dev libxxhash-dev libssl-dev libhiredis-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  pybind11-dev python3-dev python3-numpy python3-pytest python3-zmq python3-msgpack
  python3-pip python3-setuptools python3-wheel python3-venv python3-build python3-torch
  redis-server etcd-server clang-14 libclang-rt-14-dev curl iproute2 nftables util-linux ccache
  gnuplot-nox fonts-dejavu-core chromium prometheus python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
