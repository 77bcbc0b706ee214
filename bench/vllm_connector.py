#!/usr/bin/env python3
"""The vLLM connector's host path (kvtier.integrations.vllm) against a real `kvtier server`, next
to a plain memcpy of the same bytes measured in the same run (ratios, not absolute times: the
machines are shared and noisy).

A worker connector registers CPU KV tensors shaped like one TP rank of a dense model
(FlashAttention layout, bfloat16), then runs the jobs its scheduler half sends:
  save    StorePlan of a whole prompt: engine blocks -> staging (torch index_select), STORE
  load    RetrievePlan of the same prompt into other blocks: RETRIEVE, staging -> engine (numpy)
  lookup  the scheduler's get_num_new_matched_tokens for that prompt (LOOKUP + wait), a hit
Every loaded block is compared with the saved one. A save or load copies each byte twice (the
connector's staging copy and the server's), so about half the memcpy rate is the ceiling.

Usage (from the repository root):
  PYTHONPATH=build/python KVTIER_BIN=build/kvtier /usr/bin/python3 bench/vllm_connector.py
--json-out FILE also writes the numbers, the same run's memcpy and the machine as JSON (what
bench/markdown.py reads).
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
import kvtier  # noqa: E402
import vllm_harness as H  # noqa: E402
from kvtier.integrations.vllm import KvtierConnectorMetadata, RetrievePlan, StorePlan  # noqa: E402
from kvtier.server import LocalServer  # noqa: E402
from bench_report import command_line, machine, write_json  # noqa: E402 (bench/, this directory)


def median_gbps(nbytes, times):
    return nbytes / statistics.median(times) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=8, help="KV heads of this rank")
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=16)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--prompt-chunks", type=int, default=8)
    ap.add_argument("--staging-blocks", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json-out", metavar="FILE", help="also write the report as JSON to FILE")
    args = ap.parse_args()

    bs, chunk = args.block_size, args.chunk_size
    tokens_n = args.prompt_chunks * chunk
    blocks_n = tokens_n // bs
    num_blocks = 2 * blocks_n + 8
    bytes_per_token = args.layers * 2 * args.heads * args.head_dim * 2
    prompt_bytes = tokens_n * bytes_per_token
    l1_gb = max(0.25, 2.5 * args.rounds * prompt_bytes / 2**30)
    print(f"# {args.layers} layers x {args.heads} KV heads x {args.head_dim} (bf16): "
          f"{bytes_per_token // 1024} KiB/token; prompt {tokens_n} tokens = "
          f"{prompt_bytes / 2**20:.0f} MiB; chunk {chunk}, block {bs}; torch threads "
          f"{torch.get_num_threads()}")

    src = np.random.default_rng(0).integers(0, 256, prompt_bytes, dtype=np.uint8)
    dst = np.empty_like(src)
    memcpy = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        memcpy.append(time.perf_counter() - t0)
    memcpy_gbps = median_gbps(prompt_bytes, memcpy)
    print(f"memcpy (numpy, one thread) of the prompt's bytes: {memcpy_gbps:.2f} GB/s")
    print(f"{'staging blocks':>14} {'save GB/s':>10} {'vs memcpy':>9} {'load GB/s':>10} "
          f"{'vs memcpy':>9} {'lookup p50 ms':>13}")

    rows = []
    with LocalServer(l1_size_gb=l1_gb, chunk_size=chunk, prefault=True) as srv:
        for staging in args.staging_blocks:
            model = f"bench-{staging}"
            extra = {"kvtier.port": srv.port, "kvtier.model": model,
                     "kvtier.staging_blocks": staging, "kvtier.timeout_ms": 60000}
            spec = H.FullAttentionSpec(bs, args.heads, args.head_dim, torch.bfloat16)
            kvcc = H.KVCacheConfig(num_blocks, [], [H.KVCacheGroupSpec([], spec)])
            cfg = H.make_config(model, block_size=bs, extra=extra, dtype=torch.bfloat16)
            worker = H.make_connector(cfg, "WORKER", kvcc)
            sched = H.make_connector(cfg, "SCHEDULER", kvcc)
            caches = {f"layers.{i}": torch.empty(2, num_blocks, bs, args.heads, args.head_dim,
                                                 dtype=torch.bfloat16)
                      for i in range(args.layers)}
            for t in caches.values():
                t.view(torch.uint8).copy_(torch.randint(0, 256, t.view(torch.uint8).shape,
                                                        dtype=torch.uint8))
            worker.register_kv_caches(caches)
            saves, loads, lookups = [], [], []
            for r in range(args.rounds):
                toks = np.arange(r * 10**6, r * 10**6 + tokens_n, dtype=np.uint32) + staging
                hashes = kvtier.chunk_hashes(toks, chunk)
                src_blocks = list(range(blocks_n))
                dst_blocks = list(range(blocks_n, 2 * blocks_n))
                meta = KvtierConnectorMetadata(saves=[StorePlan(
                    f"s{r}", hashes, "", 0, args.prompt_chunks, src_blocks)])
                t0 = time.perf_counter()
                worker.bind_connector_metadata(meta)
                worker.start_load_kv(None)
                saves.append(time.perf_counter() - t0)
                worker.clear_connector_metadata()

                req = H.Request(f"q{r}", toks.tolist() + [1])
                t0 = time.perf_counter()
                n, _ = sched.get_num_new_matched_tokens(req, 0)
                lookups.append(time.perf_counter() - t0)
                assert n == tokens_n, (n, tokens_n)
                sched.request_finished(req, [])

                meta = KvtierConnectorMetadata(loads=[RetrievePlan(
                    f"l{r}", hashes, "", 0, args.prompt_chunks, 0, tokens_n, dst_blocks)])
                t0 = time.perf_counter()
                worker.bind_connector_metadata(meta)
                worker.start_load_kv(None)
                loads.append(time.perf_counter() - t0)
                worker.clear_connector_metadata()
                assert not worker.get_block_ids_with_load_errors()
                for t in caches.values():
                    assert torch.equal(t[:, blocks_n:2 * blocks_n].view(torch.uint8),
                                       t[:, :blocks_n].view(torch.uint8))
            save_gbps, load_gbps = median_gbps(prompt_bytes, saves), median_gbps(
                prompt_bytes, loads)
            print(f"{staging:>14} {save_gbps:>10.2f} {save_gbps / memcpy_gbps:>9.2f} "
                  f"{load_gbps:>10.2f} {load_gbps / memcpy_gbps:>9.2f} "
                  f"{statistics.median(lookups) * 1e3:>13.2f}")
            rows.append({"staging_blocks": staging, "save_gbps": save_gbps,
                         "save_over_memcpy": save_gbps / memcpy_gbps, "load_gbps": load_gbps,
                         "load_over_memcpy": load_gbps / memcpy_gbps,
                         "lookup_p50_ms": statistics.median(lookups) * 1e3})
            worker.shutdown()
            sched.shutdown()
    if args.json_out:
        write_json(args.json_out, {
            "bench": "vllm_connector", "command": command_line(), "machine": machine(),
            "config": {"layers": args.layers, "heads": args.heads, "head_dim": args.head_dim,
                       "block_size": bs, "chunk_size": chunk, "prompt_tokens": tokens_n,
                       "prompt_bytes": prompt_bytes, "rounds": args.rounds},
            "limits": {"memcpy_gbps": memcpy_gbps},
            "rows": rows})


if __name__ == "__main__":
    main()
