#!/usr/bin/env python3
"""Markdown table of `kvtier bench server --trace --json` summaries (scripts/replay_at_scale.sh)."""

import json
import os
import sys


def row(path):
    j = json.load(open(path))
    t, c = j["trace"], j["config"]
    tiers, ttft = t["tiers"], t["ttft"]
    args = " ".join(c["server_args"])
    tier = "L1 + store" if '"type":"store"' in args else "L1 + fs" if '"type":"fs"' in args else "L1"
    pace = f"{t['speedup']:g}x" if t["speedup"] > 0 else "back to back"
    return (f"| {os.path.basename(path)[:-5]} | {os.path.basename(t['file'])} | {t['requests']} | "
            f"{c['l1_size_gb']:g} | {tier} | {pace} | {tiers.get('l1_hit_rate', 0):.1%} | "
            f"{tiers.get('l2_hit_rate', 0):.1%} | {t['ideal_hit_rate']:.1%} | "
            f"{ttft['recompute']['p50_ms']:.0f} / {ttft['recompute']['p99_ms']:.0f} | "
            f"{ttft['kvtier']['p50_ms']:.0f} / {ttft['kvtier']['p99_ms']:.0f} | "
            f"{ttft['speedup']['p50_ms']:.2f}x / {ttft['speedup']['p99_ms']:.2f}x | "
            f"{t['retrieve_fit']['gbps']:.1f} | {j['limits']['memcpy_1mib_gbps']['median']:.1f} | "
            f"{j['throughput']['wall_s']:.0f} | {'ok' if j['ok'] else 'FAILED'} |")


def main():
    print("| run | trace | requests | L1 GiB | tiers | pacing | L1 hits | L2 hits | unbounded |"
          " TTFT recompute p50 / p99 ms | TTFT kvtier p50 / p99 ms | TTFT lower p50 / p99 |"
          " RETRIEVE fit GB/s | memcpy GB/s | wall s | verified |")
    print("|" + "---|" * 16)
    for p in sys.argv[1:]:
        print(row(p))


if __name__ == "__main__":
    main()
