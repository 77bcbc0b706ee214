#!/usr/bin/env python3
"""The SGLang HiCache backend (kvtier.integrations.sglang) against a real `kvtier master` +
`kvtier node`: batch_set_v1 (backup) and batch_get_v1 (prefetch) of whole batches of pages of an
SGLang-shaped host pool, next to a single-thread memcpy of the same bytes in the same run (ratios,
not absolute times: the machines are shared and noisy). Every page loaded is compared with the
page written.

Rows: dummy client / embedded node x page_first / layer_first MHA pools (bf16).
Usage (from the repository root):
  PYTHONPATH=build/python KVTIER_BIN=build/kvtier /usr/bin/python3 bench/sglang_backend.py
--json-out FILE also writes the numbers, the same run's memcpy and the machine as JSON (what
bench/markdown.py reads).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from kvtier.integrations.sglang import KvtierHiCacheStorage  # noqa: E402
from bench_report import command_line, machine, write_json  # noqa: E402 (bench/, as below)
from peer_limits import memcpy_gbps  # noqa: E402 (bench/, the script's own directory)
from sglang_harness import HostPool, StorageConfig, page_hashes, slots  # noqa: E402
from store_cluster import StoreCluster  # noqa: E402


def run(backend, pool, args, tag):
    n, page = args.batch, args.page
    page_bytes = pool.kv_buffer.numel() * pool.kv_buffer.element_size() * page // pool.size
    rates = {"set": [], "get": []}
    for r in range(args.rounds + 1):  # round 0 warms up (first touch of the node's segment)
        keys = page_hashes([r * 7919 + i for i in range(n * page)], page)
        keys = [f"{tag}-{k}" for k in keys]
        start = time.perf_counter()
        assert backend.batch_set_v1(keys, slots(range(n), page)) == [True] * n
        rates["set"].append(n * page_bytes / (time.perf_counter() - start) / 1e9)
        start = time.perf_counter()
        assert backend.batch_get_v1(keys, slots(range(n, 2 * n), page)) == [True] * n
        rates["get"].append(n * page_bytes / (time.perf_counter() - start) / 1e9)
        low, high = pool.token_view(slice(0, n * page)), pool.token_view(slice(n * page,
                                                                                2 * n * page))
        assert torch.equal(low, high), "a loaded page differs from the page written"
        time.sleep(0.25)  # the gets' leases end, so clear frees the space for the next round
        backend.clear()
    return page_bytes, {k: statistics.median(v[1:]) for k, v in rates.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=32, help="pages per call")
    ap.add_argument("--page", type=int, default=64, help="tokens per page")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json-out", metavar="FILE", help="also write the report as JSON to FILE")
    args = ap.parse_args()
    heads, head_dim = 8, 128
    cluster = StoreCluster(lease_ms=200, segment=str(1 << 30))
    cluster.start()
    rows = []
    try:
        for mode in ("dummy", "embedded"):
            for layout in ("page_first", "layer_first"):
                extra = ({"node_address": cluster.node_address} if mode == "dummy" else
                         {"master_server_address": cluster.master_address,
                          "global_segment_size": "1GB"})
                extra["key_prefix"] = f"bench-{mode}-{layout}/"
                backend = KvtierHiCacheStorage(StorageConfig(extra_config=extra), {})
                pool = HostPool(layout, mla=False, pages=2 * args.batch, heads=heads,
                                head_dim=head_dim, page=args.page, layers=args.layers)
                backend.register_mem_pool_host(pool)
                page_bytes, rates = run(backend, pool, args, f"{mode}-{layout}")
                rows.append((mode, layout, rates))
                backend.close()
    finally:
        cluster.stop()
    limit = memcpy_gbps(args.batch * page_bytes, args.rounds)
    print(f"kvtier SGLang HiCache backend: batches of {args.batch} pages x "
          f"{page_bytes / 2**20:g} MiB "
          f"({args.page} tokens, {args.layers} layers, {heads}x{head_dim} bf16 K and V), "
          f"median of {args.rounds} rounds")
    print(f"single-thread memcpy (numpy copyto), same run: {limit:.2f} GB/s")
    print(f"{'client':<9} {'pool':<12} {'call':<14} {'GB/s':>7} {'of memcpy':>10}")
    for mode, layout, rates in rows:
        for call, key in (("batch_set_v1", "set"), ("batch_get_v1", "get")):
            print(f"{mode:<9} {layout:<12} {call:<14} {rates[key]:7.2f} "
                  f"{rates[key] / limit:10.2f}")
    if args.json_out:
        write_json(args.json_out, {
            "bench": "sglang_backend", "command": command_line(), "machine": machine(),
            "config": {"batch": args.batch, "page": args.page, "layers": args.layers,
                       "rounds": args.rounds, "page_bytes": page_bytes},
            "limits": {"memcpy_gbps": limit},
            "rows": [{"client": mode, "layout": layout, "call": call, "gbps": rates[key],
                      "over_memcpy": rates[key] / limit}
                     for mode, layout, rates in rows
                     for call, key in (("batch_set_v1", "set"), ("batch_get_v1", "get"))]})


if __name__ == "__main__":
    main()
