#!/usr/bin/env python3
"""Re-replication throughput of the kvtier store, next to raw loopback TCP measured in the same
run (ratios, not absolute times: the machines are shared and noisy).

A master with --replicas 2 and three nodes A, B, C; a dummy client of a fourth node without a
segment (so the pairs spread over A, B and C) puts `--mib` MiB of values. Then C is SIGKILLed:
once the master has dropped it (client TTL), A and B copy every object that had a replica on C.
Reported: the bytes copied over the time from the drop until nothing is below two replicas,
for each `--repair-mb-s` given (1000000: no cap in effect; 256: the default). Afterwards every
value is read back and compared.

Usage (from the repository root):
  PYTHONPATH=build/python KVTIER_BIN=build/kvtier /usr/bin/python3 bench/store_rereplication.py
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from kvtier.store import DistributedStore  # noqa: E402
from child_process import wait_until  # noqa: E402
from launchers import find_binary, start_master, start_node  # noqa: E402


def raw_tcp_gbps():
    """The raw loopback TCP limit `kvtier bench store` measures (median of its quick trials)."""
    out = subprocess.run([find_binary(), "bench", "store", "--sections", "cross-node", "--quick",
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)["limits"]["raw_tcp_gbps"]["median"]


def status(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=5) as r:
        return json.load(r)


def value(key, size):
    return (key.encode() * (size // len(key) + 1))[:size]


def run(args, repair_mb_s):
    procs = []
    try:
        master = start_master(["--replicas", "2", "--node-ttl-s", "2", "--log-level", "error"],
                              http=True)
        procs.append(master)
        mhttp = master.http_port
        nodes = {}
        for name, segment in (("a", args.segment), ("b", args.segment), ("c", args.segment),
                              ("d", "0")):
            p = start_node(master.address, ["--repair-mb-s", str(repair_mb_s),
                                            "--log-level", "error"],
                           segment=segment, prefault=True)
            procs.append(p)
            nodes[name] = (p, p.port)
        # D mounts nothing, so it is not counted.
        wait_until(lambda: status(mhttp)["nodes_alive"] == 3, 20, "cluster", child=master)

        store = DistributedStore()
        assert store.setup_dummy(0, 64 << 20, f"127.0.0.1:{nodes['d'][1]}") == 0
        size = args.value_kib << 10
        keys = [f"rr-{i}" for i in range((args.mib << 20) // size)]
        for k in keys:
            assert store.put(k, value(k, size)) == 0, k

        os.kill(nodes["c"][0].pid, signal.SIGKILL)
        killed = time.monotonic()
        while status(mhttp)["nodes_alive"] != 2:
            time.sleep(0.01)
        dropped = time.monotonic()
        s = status(mhttp)
        waiting = s["under_replicated"] + s["repairs_pending"]
        before = s["counters"]["repaired_bytes"]
        while True:
            s = status(mhttp)
            if s["under_replicated"] == 0 and s["repairs_pending"] == 0:
                break
            if time.monotonic() - dropped > 300:
                raise RuntimeError(f"not repaired after 300 s: {s}")
            time.sleep(0.01)
        done = time.monotonic()
        copied = s["counters"]["repaired_bytes"] - before
        for k in keys:
            assert store.get(k) == value(k, size), f"{k} came back wrong"
        store.close()
        return {"repair_mb_s": repair_mb_s, "objects": waiting, "bytes": copied,
                "drop_s": dropped - killed, "repair_s": done - dropped,
                "gbps": copied / (done - dropped) / 1e9}
    finally:
        for p in reversed(procs):
            p.stop()
            p.remove_log()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=1536, help="MiB of values put before the kill")
    ap.add_argument("--value-kib", type=int, default=1024)
    ap.add_argument("--segment", default="2GB", help="segment of A, B and C")
    ap.add_argument("--repair-mb-s", type=int, nargs="+", default=[1000000, 256])
    ap.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    ap.add_argument("--json-out", metavar="FILE", help="also write the JSON to FILE")
    args = ap.parse_args()
    tcp = raw_tcp_gbps()
    rows = [run(args, r) for r in args.repair_mb_s]
    report = {"raw_tcp_gbps": tcp, "runs": rows}
    if args.json_out:
        tmp = args.json_out + ".tmp"  # a failed run never leaves a half-written report
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
        os.replace(tmp, args.json_out)
    if args.json:
        print(json.dumps(report))
        return
    print(f"raw loopback TCP (kvtier bench store's probe): {tcp:.2f} GB/s")
    print(f"{'--repair-mb-s':>14} {'objects':>8} {'MiB':>8} {'drop s':>7} {'repair s':>9} "
          f"{'GB/s':>6} {'/ TCP':>6} {'/ cap':>6}")
    for r in rows:
        cap = r["repair_mb_s"] * 2 * (1 << 20) / 1e9  # two nodes copy
        of_cap = f"{r['gbps'] / cap:.2f}" if cap < tcp else "-"
        print(f"{r['repair_mb_s']:>14} {r['objects']:>8} {r['bytes'] / (1 << 20):>8.0f} "
              f"{r['drop_s']:>7.2f} {r['repair_s']:>9.2f} {r['gbps']:>6.2f} "
              f"{r['gbps'] / tcp:>6.2f} {of_cap:>6}")


if __name__ == "__main__":
    main()
