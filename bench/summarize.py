#!/usr/bin/python3
"""Ranges over several `kvtier bench server --json` reports.

Usage: bench/summarize.py run1.json run2.json ...

Prints, for the numbers docs/BENCHMARKS.md and docs/perf-notes/cache-server.md quote, the median
and the min-max range over the runs, so a single noisy run on the shared machine is not mistaken
for the result.
"""
import json
import statistics
import sys

# (label, path into the report, format)
ROWS = [
    ("load average (1 min)", ("machine", "load_avg_1m"), "{:.1f}"),
    ("memcpy 1 MiB, GB/s", ("limits", "memcpy_1mib_gbps", "median"), "{:.1f}"),
    ("gather 8 KiB, GB/s", ("limits", "gather_gbps", "median"), "{:.1f}"),
    ("ZMQ echo RTT p50, us", ("limits", "zmq_rtt_p50_us"), "{:.0f}"),
    ("ZMQ echo RTT p50 after 1 ms idle, us", ("limits", "zmq_idle_1ms_rtt_p50_us"), "{:.0f}"),
    ("STORE p50, us", ("ops", "STORE", "p50_us"), "{:.0f}"),
    ("STORE p99, us", ("ops", "STORE", "p99_us"), "{:.0f}"),
    ("STORE GB/s", ("ops", "STORE", "gbps"), "{:.2f}"),
    ("RETRIEVE p50, us", ("ops", "RETRIEVE", "p50_us"), "{:.0f}"),
    ("RETRIEVE p99, us", ("ops", "RETRIEVE", "p99_us"), "{:.0f}"),
    ("RETRIEVE GB/s", ("ops", "RETRIEVE", "gbps"), "{:.2f}"),
    ("PING p50, us", ("ops", "PING", "p50_us"), "{:.0f}"),
    ("LOOKUP p50, us", ("ops", "LOOKUP", "p50_us"), "{:.0f}"),
    ("LOOKUP p99, us", ("ops", "LOOKUP", "p99_us"), "{:.0f}"),
    ("WAIT_PREFETCH p50, us", ("ops", "WAIT_PREFETCH", "p50_us"), "{:.0f}"),
    ("END_SESSION p50, us", ("ops", "END_SESSION", "p50_us"), "{:.0f}"),
    ("tight-loop PING p50, us", ("server_rtt_tight", "ping_p50_us"), "{:.0f}"),
    ("tight-loop LOOKUP p50, us", ("server_rtt_tight", "lookup_p50_us"), "{:.0f}"),
    ("tight-loop LookupAndWait p50, us", ("server_rtt_tight", "lookup_and_wait_p50_us"), "{:.0f}"),
    ("STORE+RETRIEVE GB/s", ("ratios", "store_retrieve_gbps"), "{:.2f}"),
    ("STORE+RETRIEVE / memcpy (goal >= 0.90)", ("ratios", "store_retrieve_over_memcpy"),
     "{:.2f}"),
    ("LOOKUP p50 / ZMQ RTT p50 (goal <= 1.5)", ("ratios", "lookup_p50_over_zmq_rtt_p50"),
     "{:.2f}"),
    ("tight LOOKUP p50 / ZMQ RTT p50", ("server_rtt_tight", "lookup_p50_over_zmq_rtt_p50"),
     "{:.2f}"),
    ("aggregate copy GB/s (wall)", ("throughput", "aggregate_copy_gbps"), "{:.2f}"),
]


def lookup(report, path):
    for key in path:
        if not isinstance(report, dict) or key not in report:
            return None
        report = report[key]
    return report


def main(paths):
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    reports = []
    for p in paths:
        with open(p) as f:
            reports.append(json.load(f))
    failed = [p for p, r in zip(paths, reports) if not r.get("ok", False)]
    print(f"{len(reports)} runs" + (f", FAILED: {', '.join(failed)}" if failed else ""))
    print(f"{'':42}{'median':>10}{'min':>10}{'max':>10}")
    for label, path, fmt in ROWS:
        values = [v for v in (lookup(r, path) for r in reports) if v is not None]
        if not values:
            continue
        cells = [fmt.format(x) for x in (statistics.median(values), min(values), max(values))]
        print(f"{label:42}" + "".join(f"{c:>10}" for c in cells))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
