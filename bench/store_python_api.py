#!/usr/bin/env python3
"""The Mooncake-style Python calls of kvtier.store against a real `kvtier master` + `kvtier node`,
next to a single-thread memcpy of the same bytes measured in the same run (ratios, not absolute
times: the machines are shared and noisy).

Rows, for a dummy client of the node and for an embedded node in this process:
  batch_put_from / batch_get_into              zero-copy, memory from MooncakeHostMemAllocator
  batch_put_from_multi_buffers / ..._get_into_  each value = `--parts` buffers (gathered/scattered)

Every value read back is compared with what was written. Usage (from the repository root):
  PYTHONPATH=build/python KVTIER_BIN=build/kvtier /usr/bin/python3 bench/store_python_api.py
--json-out FILE also writes the numbers, the same run's memcpy and the machine as JSON (what
bench/markdown.py reads).
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from kvtier.store import MooncakeDistributedStore, MooncakeHostMemAllocator  # noqa: E402
from store_cluster import StoreCluster  # noqa: E402
from bench_report import command_line, machine, write_json  # noqa: E402 (bench/, this directory)


CALLS = {"put": "batch_put_from", "get": "batch_get_into",
         "put_multi": "batch_put_from_multi_buffers", "get_multi": "batch_get_into_multi_buffers"}


def memcpy_gbps(src, dst, rounds):
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        np.copyto(dst, src)
        rates.append(src.nbytes / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def run_mode(store, mem, args, tag, rounds):
    """Median GB/s of each call over `rounds` batches, bytes checked every round."""
    n, size, parts = args.batch, args.value_bytes, args.parts
    part = size // parts
    src_base, dst_base = mem.ctypes.data, mem.ctypes.data + n * size
    src, dst = mem[: n * size], mem[n * size: 2 * n * size]
    rates = {k: [] for k in ("put", "get", "put_multi", "get_multi")}
    for r in range(rounds):
        src[:] = np.random.default_rng(r).integers(0, 256, n * size, dtype=np.uint8)
        keys = [f"{tag}-{r}-{i}" for i in range(n)]
        codes, t = timed(lambda: store.batch_put_from(
            keys, [src_base + i * size for i in range(n)], [size] * n))
        assert codes == [0] * n, codes
        rates["put"].append(n * size / t / 1e9)
        dst[:] = 0
        got, t = timed(lambda: store.batch_get_into(
            keys, [dst_base + i * size for i in range(n)], [size] * n))
        assert got == [size] * n and np.array_equal(src, dst), got
        rates["get"].append(n * size / t / 1e9)

        mkeys = [f"{tag}-m-{r}-{i}" for i in range(n)]
        ptrs = [[src_base + i * size + j * part for j in range(parts)] for i in range(n)]
        sizes = [[part] * parts for _ in range(n)]
        codes, t = timed(lambda: store.batch_put_from_multi_buffers(mkeys, ptrs, sizes))
        assert codes == [0] * n, codes
        rates["put_multi"].append(n * size / t / 1e9)
        dst[:] = 0
        dptrs = [[dst_base + i * size + j * part for j in range(parts)] for i in range(n)]
        got, t = timed(lambda: store.batch_get_into_multi_buffers(mkeys, dptrs, sizes))
        assert got == [part * parts] * n and np.array_equal(src, dst), got
        rates["get_multi"].append(n * size / t / 1e9)
        # Room for the next round, once the gets' 200 ms leases end.
        for k in (keys, mkeys):
            while any(c not in (0, -704) for c in store.batch_remove(k)):
                time.sleep(0.02)
    return {k: statistics.median(v) for k, v in rates.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32, help="keys per call")
    ap.add_argument("--value-bytes", type=int, default=1 << 20)
    ap.add_argument("--parts", type=int, default=8, help="buffers per value (multi-buffer rows)")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json-out", metavar="FILE", help="also write the report as JSON to FILE")
    args = ap.parse_args()
    if args.value_bytes % args.parts:
        ap.error("--value-bytes must be a multiple of --parts")

    batch_bytes = args.batch * args.value_bytes
    cluster = StoreCluster(lease_ms=200, segment=str(8 * batch_bytes + (64 << 20)))
    allocator = MooncakeHostMemAllocator()
    ptr = allocator.alloc(2 * batch_bytes)
    assert ptr != 0, "host allocation failed"
    mem = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (2 * batch_bytes)).from_address(ptr))
    mem[:] = 1  # touch every page once, as the memcpy yardstick's buffers are
    cluster.start()
    try:
        limit = memcpy_gbps(mem[:batch_bytes], mem[batch_bytes:], args.rounds)
        rows = []
        for mode in ("dummy", "embedded"):
            s = MooncakeDistributedStore()
            if mode == "dummy":
                code = s.setup_dummy(0, args.value_bytes + (1 << 20), cluster.node_address)
            else:
                code = s.setup("127.0.0.1", "P2PHANDSHAKE", str(8 * batch_bytes), "16MB", "tcp",
                               "", cluster.master_address)
            assert code == 0, cluster.logs()
            assert s.register_buffer(ptr, 2 * batch_bytes) == 0
            rates = run_mode(s, mem, args, f"{mode}-{os.getpid()}", args.rounds)
            rows.append((mode, rates))
            s.close()
    finally:
        cluster.stop()
        allocator.free(ptr)
    mib = args.value_bytes / 2**20
    print(f"kvtier.store Python API: batches of {args.batch} x {mib:g} MiB values "
          f"({args.parts} parts for the multi-buffer calls), median of {args.rounds} rounds")
    print(f"single-thread memcpy (numpy copyto), same run: {limit:.2f} GB/s")
    print(f"{'client':<9} {'call':<32} {'GB/s':>7} {'of memcpy':>10}")
    for mode, rates in rows:
        for k, name in CALLS.items():
            print(f"{mode:<9} {name:<32} {rates[k]:7.2f} {rates[k] / limit:10.2f}")
    if args.json_out:
        write_json(args.json_out, {
            "bench": "store_python_api", "command": command_line(), "machine": machine(),
            "config": {"batch": args.batch, "value_bytes": args.value_bytes,
                       "parts": args.parts, "rounds": args.rounds},
            "limits": {"memcpy_gbps": limit},
            "rows": [{"client": mode, "call": name, "gbps": rates[k],
                      "over_memcpy": rates[k] / limit}
                     for mode, rates in rows for k, name in CALLS.items()]})


if __name__ == "__main__":
    main()
