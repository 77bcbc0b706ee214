#!/usr/bin/env python3
"""`make run`: the trace replay's summary in a few lines, from `kvtier bench server --json`.

Reads the JSON the replay wrote and prints what a new user can act on: the hit rate against an
unbounded cache's, the prefill tokens saved, the estimated TTFT with and without kvtier with the
assumption it rests on, and where the plot is. Exits 1 unless every retrieved byte was verified.
"""

import argparse
import json
import sys


def lines(j, plot, gbps_source):
    tr, ch = j["trace"], j["chunks"]
    tok, ttft, model, path = tr["tokens"], tr["ttft"], tr["model"], tr["retrieve_path"]
    assumption = path["assumption"]
    if gbps_source:
        assumption = assumption.replace("(--gpu-copy-gbps)", f"({gbps_source})")
    return [
        f"trace replay: {tr['requests']} requests of a generated multi-turn chat trace, through "
        f"`kvtier bench server --trace` (L1 {j['config']['l1_size_gb']} GiB)",
        f"  hit rate {ch['lookup_hit_rate']:.1%} (an unbounded cache {tr['ideal_hit_rate']:.1%}); "
        f"prefill tokens saved {tok['prefill_saved']:.1%} "
        f"(unbounded {tok['ideal_prefill_saved']:.1%}); "
        f"{ch['verified_bytes'] / 1e9:.2f} GB retrieved, every byte checked: "
        f"{'OK' if j['ok'] else 'FAILED'}",
        f"  estimated TTFT p50, {model['name']}: {ttft['recompute']['p50_ms']:.0f} ms recomputing, "
        f"{ttft['kvtier']['p50_ms']:.0f} ms with kvtier ({ttft['speedup']['p50_ms']:.1f}x lower) "
        f"[{assumption}; prefill {model['prefill_tokens_per_s']:,.0f} tokens/s estimated]",
        f"  plot: {plot} (its rows: .tsv beside it; every number: .json)",
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("json", help="what `kvtier bench server --trace ... --json` printed")
    ap.add_argument("--plot", required=True, help="the PNG --plot drew")
    ap.add_argument("--gbps-source", default="",
                    help="where --gpu-copy-gbps came from, said in place of '--gpu-copy-gbps'")
    args = ap.parse_args()
    with open(args.json, encoding="utf-8") as f:
        j = json.load(f)
    if "trace" not in j:
        print(f"demo_summary: {args.json} has no trace replay", file=sys.stderr)
        return 1
    print("\n".join(lines(j, args.plot, args.gbps_source)))
    for e in j.get("errors", []):
        print(f"ERROR: {e}")
    return 0 if j["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
