#!/usr/bin/env bash
# The CUDA checks, on a machine with a GPU, in a few minutes: builds with KVTIER_CUDA=ON (in
# build-gpu/), runs the CUDA tests (a GPU KV cache stored, overwritten, retrieved and compared
# through a real server; a killed GPU worker reaped; LMCache's cuda and cuda_raw wrappers
# registered from the client's frames and stored / retrieved byte for byte in NHD, HND,
# blocks-first and MLA layouts), the Python GPU tests where PyTorch sees
# CUDA, and `kvtier bench gpu` (STORE/RETRIEVE GB/s next to pinned cudaMemcpy of the same run).
# Output lands in $OUT (default build-gpu/out): the logs and bench_gpu.json.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="${BUILD_GPU:-$root/build-gpu}"
out="${OUT:-$build/out}"
jobs="${JOBS:-$(nproc)}"
mkdir -p "$build" "$out"
cd "$root"

if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > "$out/gpus.txt" 2>&1; then
  echo "tests/gpu/run.sh: no GPU here (nvidia-smi -L failed); nothing to run" >&2
  exit 77
fi
cat "$out/gpus.txt"

echo "== build (KVTIER_CUDA=ON)"
cmake -S . -B "$build" -DKVTIER_CUDA=ON -DPython_EXECUTABLE=/usr/bin/python3 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$out/configure.log"
cmake --build "$build" -j "$jobs" \
  --target kvtier gpu_tests unit_cuda unit_server integration_tests _kvtier \
  > "$out/build.log" 2>&1 || { tail -50 "$out/build.log"; exit 1; }

status=0
echo "== CUDA tests"
export KVTIER_BIN="$build/kvtier"
"$build/tests/unit_cuda" 2>&1 | tee "$out/unit_cuda.log" | tail -3 || status=1
# The *Child tests are the worker processes the others start (they skip when run alone).
"$build/tests/gpu_tests" --gtest_filter='-*Child.*' 2>&1 | tee "$out/gpu_tests.log" | tail -15 ||
  status=1
"$build/tests/unit_server" --gtest_filter='LmcacheCuda*' 2>&1 | tee "$out/unit_lmcache_cuda.log" |
  tail -3 || status=1
"$build/tests/integration_tests" --gtest_filter='GpuRegistration.*:DataPath.*' 2>&1 |
  tee "$out/integration.log" | tail -3 || status=1
if grep -q "SKIPPED" "$out/gpu_tests.log"; then
  echo "tests/gpu/run.sh: CUDA tests were skipped on a GPU machine" >&2
  status=1
fi

echo "== Python GPU tests"
if /usr/bin/python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' \
    2> /dev/null; then
  PYTHONPATH="$build/python" /usr/bin/python3 -m pytest -q -rs tests/python/test_cuda_ipc.py \
    tests/python/test_vllm_connector.py 2>&1 | tee "$out/python_gpu.log" | tail -5 || status=1
else
  echo "PyTorch here has no CUDA: the Python GPU tests do not run" | tee "$out/python_gpu.log"
fi

echo "== kvtier bench gpu"
"$build/kvtier" bench gpu | tee "$out/bench_gpu.txt" || status=1
"$build/kvtier" bench gpu --json > "$out/bench_gpu.json" || status=1
exit $status
