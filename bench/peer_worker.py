"""One store, one client mode, measured in a process of its own (so kvtier's and Mooncake's
native modules never share a process, and every first pass is a real first pass). Run by
bench/mooncake_peer.py as `python peer_worker.py '<json spec>'`; prints one JSON line of results.

Spec: system ("kvtier" | "mooncake"), mode ("dummy" | "embedded"), master, server (the node /
mooncake_client a dummy attaches to), server_pid (whose page faults are counted; this process
for embedded), segment_bytes, batch_bytes, sizes, rounds, lease_ms, meta_calls.

Per object size: two fresh buffers from the store's own MooncakeHostMemAllocator (what both
stores need for a dummy to move bytes without a copy; allocation timed), registered (timed),
then the source written by this process (as an engine registers its pool once and then computes
KV into it), then
  first pass: batch_put_from of the whole source, batch_get_into the (untouched) destination;
  warm passes: the same with new keys, `rounds` times, median.
Every get is compared byte for byte. Every pass has keys of its own; a size's keys are removed
when it ends (after the read lease). The segment holds them all in memory the warm-up below
already wrote, so no pass meets eviction or a first write into the segment.
"""

import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

KIB = 1 << 10
MIB = 1 << 20


def minor_faults(pid):
    """Minor page faults of `pid` so far (/proc/PID/stat field 10)."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def view(ptr, size):
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


class Worker:
    def __init__(self, spec):
        self.spec = spec
        if spec["system"] == "kvtier":
            from kvtier.store import MooncakeDistributedStore, MooncakeHostMemAllocator
        else:
            from mooncake.store import MooncakeDistributedStore, MooncakeHostMemAllocator
        self.store = MooncakeDistributedStore()
        self.allocator = MooncakeHostMemAllocator()
        self.pid = spec["server_pid"] or os.getpid()
        self.tag = f"{spec['system']}-{spec['mode']}-{os.getpid()}"
        self.lease_s = spec["lease_ms"] / 1000.0

    def setup(self):
        s = self.spec
        deadline = time.monotonic() + 20
        while True:
            if s["mode"] == "dummy":
                code = self.store.setup_dummy(16 * MIB, 16 * MIB, s["server"])
            else:
                code = self.store.setup("127.0.0.1", "P2PHANDSHAKE", s["segment_bytes"], 16 * MIB,
                                        "tcp", "", s["master"])
            if code == 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.tag}: setup returned {code}")
            time.sleep(0.2)

    def alloc(self, size):
        ptr = self.allocator.alloc(size)
        if not ptr:
            raise RuntimeError(f"{self.tag}: MooncakeHostMemAllocator.alloc({size}) failed")
        return ptr

    def register(self, ptr, size):
        code = self.store.register_buffer(ptr, size)
        if code != 0:
            raise RuntimeError(f"{self.tag}: register_buffer returned {code}")

    def put(self, keys, base, size):
        ptrs = [base + i * size for i in range(len(keys))]
        codes, t = timed(lambda: self.store.batch_put_from(keys, ptrs, [size] * len(keys)))
        if list(codes) != [0] * len(keys):
            raise RuntimeError(f"{self.tag}: batch_put_from: {sorted(set(codes))}")
        return t

    def get(self, keys, base, size):
        ptrs = [base + i * size for i in range(len(keys))]
        got, t = timed(lambda: self.store.batch_get_into(keys, ptrs, [size] * len(keys)))
        if list(got) != [size] * len(keys):
            raise RuntimeError(f"{self.tag}: batch_get_into: {sorted(set(got))}")
        return t

    def remove(self, keys):
        """Removes keys once their read lease has ended (either store refuses before)."""
        pending = list(keys)
        deadline = time.monotonic() + 10 * self.lease_s + 5
        while pending:
            codes = self.store.batch_remove(pending)
            pending = [k for k, c in zip(pending, codes) if c not in (0, -704)]  # -704: gone
            if pending:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.tag}: batch_remove keeps refusing: {set(codes)}")
                time.sleep(self.lease_s / 4)

    def warm_segment(self):
        """Writes most of the server's segment once, then frees it: a store's first write into a
        segment page is slow on a VM (docs/perf-notes/issue-19.md), and this bench times buffers."""
        s = self.spec
        size = min(4 * MIB, s["batch_bytes"])
        n = s["batch_bytes"] // size
        base = self.alloc(n * size)
        view(base, n * size)[:] = 0x5A
        self.register(base, n * size)
        keys = []
        for r in range(int(0.7 * s["segment_bytes"]) // (n * size)):
            batch = [f"{self.tag}-warm-{r}-{i}" for i in range(n)]
            self.put(batch, base, size)
            keys += batch
        self.remove(keys)

    def transfer(self, size):
        s = self.spec
        n = max(1, s["batch_bytes"] // size)
        total = n * size
        (src, dst), alloc = timed(lambda: (self.alloc(total), self.alloc(total)))
        sv, dv = view(src, total), view(dst, total)
        f0 = minor_faults(self.pid)
        _, reg = timed(lambda: (self.register(src, total), self.register(dst, total)))
        f1 = minor_faults(self.pid)
        # Written after registration, as an engine registers its pool once and then computes KV
        # into it.
        sv[:] = np.random.default_rng(size).integers(0, 256, total, dtype=np.uint8)
        f1b = minor_faults(self.pid)  # the fill's own faults (embedded: this process) left out
        keys = [f"{self.tag}-{size}-first-{i}" for i in range(n)]
        put_first = self.put(keys, src, size)
        f2 = minor_faults(self.pid)
        get_first = self.get(keys, dst, size)
        f3 = minor_faults(self.pid)
        if not np.array_equal(sv, dv):
            raise RuntimeError(f"{self.tag}: first get of {size} B values returned other bytes")
        written = keys
        puts, gets, put_faults = [], [], []
        for r in range(s["rounds"]):
            keys = [f"{self.tag}-{size}-{r}-{i}" for i in range(n)]
            written += keys
            g0 = minor_faults(self.pid)
            puts.append(self.put(keys, src, size))
            put_faults.append(minor_faults(self.pid) - g0)
            dv[:] = 0
            gets.append(self.get(keys, dst, size))
            if not np.array_equal(sv, dv):
                raise RuntimeError(f"{self.tag}: get of {size} B values returned other bytes")
        self.remove(written)  # once the last read lease has ended
        gbps = lambda t: total / t / 1e9  # noqa: E731
        return {
            "size": size, "keys": n, "alloc_s": alloc, "register_s": reg,
            "register_faults": f1 - f0,
            "put_first_gbps": gbps(put_first), "get_first_gbps": gbps(get_first),
            "put_first_faults": f2 - f1b, "get_first_faults": f3 - f2,
            "put_warm_gbps": gbps(statistics.median(puts)),
            "get_warm_gbps": gbps(statistics.median(gets)),
            "put_warm_faults": statistics.median(put_faults),
        }

    def metadata(self):
        """p50/p99 in microseconds of batch_is_exist (1 and 32 keys, all present), get_size and
        remove (one key per call), each over `meta_calls` calls after up to 200 untimed ones."""
        calls = self.spec["meta_calls"]
        size = 4 * KIB
        base = self.alloc(32 * size)
        view(base, 32 * size)[:] = 7
        self.register(base, 32 * size)
        present = [f"{self.tag}-meta-{i}" for i in range(32)]
        self.put(present, base, size)
        warm = min(200, calls)  # untimed calls first: connections, threads and caches settle
        doomed = []
        for b in range(0, calls + warm, 32):
            batch = [f"{self.tag}-rm-{b + i}" for i in range(32)]
            self.put(batch, base, size)
            doomed += batch

        def percentiles(fn, count):
            for i in range(warm):
                fn(count + i)
            lat = []
            for i in range(count):
                _, t = timed(lambda: fn(i))
                lat.append(t * 1e6)
            lat.sort()
            return {"p50_us": lat[len(lat) // 2], "p99_us": lat[min(len(lat) - 1,
                                                                     int(len(lat) * 0.99))]}

        def exist(keys):
            got = self.store.batch_is_exist(keys)
            if list(got) != [1] * len(keys):
                raise RuntimeError(f"{self.tag}: batch_is_exist: {got}")

        def get_size(i):
            if self.store.get_size(present[i % 32]) != size:
                raise RuntimeError(f"{self.tag}: get_size != {size}")

        def remove(i):
            code = self.store.remove(doomed[i])
            if code != 0:
                raise RuntimeError(f"{self.tag}: remove returned {code}")

        return {
            "exist_1": percentiles(lambda i: exist([present[i % 32]]), calls),
            "exist_32": percentiles(lambda i: exist(present), calls),
            "get_size": percentiles(get_size, calls),
            "remove": percentiles(remove, calls),
        }

    def run(self):
        self.setup()
        self.warm_segment()
        out = {"transfer": [self.transfer(size) for size in self.spec["sizes"]],
               "metadata": self.metadata()}
        self.store.close()
        return out


def main():
    spec = json.loads(sys.argv[1])
    result = Worker(spec).run()
    # The stores log to stdout/stderr too: the result is the one line marked as such.
    print("PEER-RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
