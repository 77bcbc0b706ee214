#!/usr/bin/env python3
"""kvtier against Mooncake's own wheel in the same run, on the same machine, with the same sizes.

kvtier: `kvtier master` + `kvtier node`, called through `kvtier.store`. Mooncake: the wheel's
`mooncake_master` + `mooncake_client` (its standalone real client), called through its
`mooncake.store`. Both over TCP on 127.0.0.1, Mooncake with P2PHANDSHAKE metadata, both masters
with the same read lease. Two client modes for each:
  dummy     setup_dummy against the node / mooncake_client (memory shared with that process)
  embedded  setup(...) in the caller's process, which contributes the only segment
Each (store, mode) runs in a fresh cluster and a fresh worker process (bench/peer_worker.py):
put/get GB/s through batch_put_from / batch_get_into on buffers from the store's own
MooncakeHostMemAllocator (first pass through newly registered buffers and warm passes, apart),
batch_is_exist of 1 and 32 keys, get_size and remove p50/p99. Same-run limits: memcpy and a
64-byte loopback round trip (bench/peer_limits.py). Prints a Markdown table with kvtier/Mooncake
ratios (for latencies: Mooncake's time over kvtier's, so > 1 means kvtier is faster).

Usage (from the repository root, with the engine venv's Python, which has the wheel):
  PYTHONPATH=build/python KVTIER_BIN=build/kvtier <venv>/bin/python bench/mooncake_peer.py
"""

import argparse
import importlib.metadata
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import peer_clusters  # noqa: E402
import peer_limits  # noqa: E402

GOAL = 1.5
MIB = 1 << 20


def parse_sizes(text):
    units = {"K": 1 << 10, "M": 1 << 20}
    out = []
    for part in text.split(","):
        part = part.strip().upper().removesuffix("IB").removesuffix("B")
        try:
            out.append(int(part[:-1]) * units[part[-1]] if part[-1] in units else int(part))
        except (ValueError, IndexError):
            raise argparse.ArgumentTypeError(f"bad size {part!r} (e.g. 64K,1M,4M)") from None
    if any(s <= 0 for s in out):
        raise argparse.ArgumentTypeError("sizes must be positive")
    return out


def run_one(system, mode, args):
    """One fresh cluster and one worker process; the worker's result dict."""
    # The warm-up writes 70 % of it; a size's passes and the metadata keys fit in that part.
    segment = (args.rounds + 2) * args.batch_mib * MIB * 10 // 7 + 64 * MIB
    start = peer_clusters.kvtier_cluster if system == "kvtier" else peer_clusters.mooncake_cluster
    with start(args.lease_ms, segment, with_server=(mode == "dummy")) as cluster:
        spec = {"system": system, "mode": mode, "master": cluster.master_address,
                "server": cluster.server_address, "server_pid": cluster.server_pid,
                "segment_bytes": segment, "batch_bytes": args.batch_mib * MIB,
                "sizes": args.sizes, "rounds": args.rounds, "lease_ms": args.lease_ms,
                "meta_calls": args.meta_calls}
        proc = subprocess.run([sys.executable, str(HERE / "peer_worker.py"), json.dumps(spec)],
                              capture_output=True, text=True, timeout=args.worker_timeout)
        for line in proc.stdout.splitlines():
            if line.startswith("PEER-RESULT "):
                return json.loads(line[len("PEER-RESULT "):])
        logs = "\n".join(f"--- {p.name} ---\n{p.log_text()[-3000:]}" for p in cluster.procs)
        raise RuntimeError(f"{system} {mode} worker failed (exit {proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}\n{logs}")


def median_of(results, path):
    """The median over repeats of the number at `path` (a tuple of keys / indexes)."""
    values = []
    for r in results:
        for p in path:
            r = r[p]
        values.append(r)
    return statistics.median(values)


def fmt(v, unit):
    if unit == "GB/s":
        return f"{v:.2f}"
    if unit == "ms":
        return f"{v:.1f}"
    return f"{v:.0f}"


def build_rows(res, sizes, limits):
    """(mode, what, unit, kvtier, mooncake, higher_is_better, limit text) for every row."""
    rows = []
    copy = f"memcpy {limits['memcpy_gbps']:.2f} GB/s"
    for mode in ("dummy", "embedded"):
        if not res.get(("kvtier", mode)) or not res.get(("mooncake", mode)):
            continue
        k, m = res[("kvtier", mode)], res[("mooncake", mode)]
        for i, size in enumerate(sizes):
            label = f"{size >> 10} KiB" if size < MIB else f"{size >> 20} MiB"
            for key, what in (("put_warm_gbps", "batch_put_from, warm"),
                              ("get_warm_gbps", "batch_get_into, warm"),
                              ("put_first_gbps", "batch_put_from, first pass"),
                              ("get_first_gbps", "batch_get_into, first pass")):
                path = ("transfer", i, key)
                rows.append((mode, f"{what}, {label}", "GB/s", median_of(k, path),
                             median_of(m, path), True, copy))
        hops = ("Unix + TCP round trip p50 "
                f"{limits['uds']['p50_us'] + limits['tcp']['p50_us']:.0f} us"
                if mode == "dummy" else f"TCP round trip p50 {limits['tcp']['p50_us']:.0f} us")
        for key, what in (("exist_1", "batch_is_exist, 1 key"),
                          ("exist_32", "batch_is_exist, 32 keys"),
                          ("get_size", "get_size"), ("remove", "remove")):
            for pct in ("p50_us", "p99_us"):
                path = ("metadata", key, pct)
                rows.append((mode, f"{what}, {pct[:3]}", "us", median_of(k, path),
                             median_of(m, path), False, hops))
    return rows


def print_report(args, res, limits):
    version = importlib.metadata.version("mooncake-transfer-engine-non-cuda")
    print(f"\nkvtier vs Mooncake {version} (mooncake_master + mooncake_client from the wheel), "
          f"same run. Batches of {args.batch_mib} MiB, warm = median of {args.rounds} passes, "
          f"metadata over {args.meta_calls} calls, {args.repeat} repeat(s) (medians).")
    print(f"Limits, same run, measured before each store's run (medians): single-thread memcpy "
          f"{limits['memcpy_gbps']:.2f} GB/s (of {len(limits['memcpy_gbps_all'])}: "
          f"{min(limits['memcpy_gbps_all']):.2f}-{max(limits['memcpy_gbps_all']):.2f}); 64-byte "
          f"round trip between two Python processes: TCP loopback p50 "
          f"{limits['tcp']['p50_us']:.0f} us / p99 {limits['tcp']['p99_us']:.0f} us, Unix socket "
          f"p50 {limits['uds']['p50_us']:.0f} us / p99 {limits['uds']['p99_us']:.0f} us.\n")
    print("| mode | row | kvtier | Mooncake | kvtier/Mooncake | >= 1.5x | limit |")
    print("|---|---|---|---|---|---|---|")
    met = total = 0
    for mode, what, unit, kv, mc, higher, limit in build_rows(res, args.sizes, limits):
        ratio = (kv / mc if higher else mc / kv) if kv > 0 and mc > 0 else float("nan")
        ok = ratio >= GOAL
        met, total = met + ok, total + 1
        print(f"| {mode} | {what} ({unit}) | {fmt(kv, unit)} | {fmt(mc, unit)} | {ratio:.2f} | "
              f"{'yes' if ok else 'no'} | {limit} |")
    print(f"\n{met} of {total} rows meet kvtier >= {GOAL}x Mooncake.\n")
    print("First pass through newly registered buffers (medians): allocation of the two "
          "buffers (MooncakeHostMemAllocator.alloc) and their registration, and the minor page "
          "faults of the process that copies (node / mooncake_client for dummy, the caller for "
          "embedded) during registration, the first put, the first get and a warm put:\n")
    print("| mode | size | store | alloc ms | register ms | faults: register | first put | "
          "first get | warm put |")
    print("|---|---|---|---|---|---|---|---|---|")
    for mode in ("dummy", "embedded"):
        for i, size in enumerate(args.sizes):
            for system in ("kvtier", "mooncake"):
                r = res.get((system, mode))
                if not r:
                    continue
                g = lambda key: median_of(r, ("transfer", i, key))  # noqa: E731
                print(f"| {mode} | {size >> 10} KiB | {system} | {g('alloc_s') * 1e3:.1f} | "
                      f"{g('register_s') * 1e3:.1f} | "
                      f"{g('register_faults'):.0f} | {g('put_first_faults'):.0f} | "
                      f"{g('get_first_faults'):.0f} | {g('put_warm_faults'):.0f} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=parse_sizes, default=parse_sizes("64K,1M,4M"),
                    help="object sizes (default 64K,1M,4M)")
    ap.add_argument("--batch-mib", type=int, default=32, help="bytes per batch call, MiB")
    ap.add_argument("--rounds", type=int, default=5, help="warm passes per size")
    ap.add_argument("--meta-calls", type=int, default=1000, help="calls per metadata row")
    ap.add_argument("--lease-ms", type=int,
                    help="both masters' read lease (default 500 + 50 per MiB of batch: a get "
                         "must end within it, or Mooncake fails it with LEASE_EXPIRED)")
    ap.add_argument("--repeat", type=int, default=1, help="runs of every (store, mode)")
    ap.add_argument("--modes", default="dummy,embedded")
    ap.add_argument("--systems", default="kvtier,mooncake",
                    help="stores to run (the table needs both; one alone prints its raw results)")
    ap.add_argument("--worker-timeout", type=float, default=600)
    ap.add_argument("--json", help="also write every raw result here")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in ("dummy", "embedded") for m in modes):
        ap.error("--modes takes dummy and/or embedded")
    systems = [x for x in args.systems.split(",") if x]
    if not systems or any(x not in ("kvtier", "mooncake") for x in systems):
        ap.error("--systems takes kvtier and/or mooncake")
    if args.batch_mib <= 0 or args.rounds <= 0 or args.meta_calls <= 0 or args.repeat <= 0:
        ap.error("--batch-mib, --rounds, --meta-calls and --repeat must be positive")
    if args.lease_ms is None:
        args.lease_ms = 500 + 50 * args.batch_mib
    if any(s > args.batch_mib * MIB for s in args.sizes):
        ap.error("every size must fit in one batch (--batch-mib)")

    # The limits are measured before every worker, so they follow the machine through the run.
    copies, tcp, uds = [], [], []
    res = {}
    for rep in range(args.repeat):
        # Alternate which store goes first, so a drift of the machine does not favour one.
        order = systems if rep % 2 == 0 else systems[::-1]
        for mode in modes:
            for system in order:
                print(f"[{rep + 1}/{args.repeat}] {system} {mode} ...", file=sys.stderr,
                      flush=True)
                copies.append(peer_limits.memcpy_gbps(args.batch_mib * MIB))
                tcp.append(peer_limits.tcp_round_trip(500))
                uds.append(peer_limits.uds_round_trip(500))
                res.setdefault((system, mode), []).append(run_one(system, mode, args))
    med = lambda runs, k: statistics.median(r[k] for r in runs)  # noqa: E731
    limits = {"memcpy_gbps": statistics.median(copies), "memcpy_gbps_all": copies,
              "tcp": {k: med(tcp, k) for k in ("p50_us", "p99_us")},
              "uds": {k: med(uds, k) for k in ("p50_us", "p99_us")}}
    if len(systems) == 2:
        print_report(args, res, limits)
    else:
        print(json.dumps({"limits": limits, **{f"{s} {m}": v for (s, m), v in res.items()}},
                         indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items()}, "limits": limits,
                       "results": {f"{s} {m}": v for (s, m), v in res.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
