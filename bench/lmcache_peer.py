#!/usr/bin/env python3
"""LMCache's own multiprocess server (`lmcache server`) and kvtier's LMCache front (`kvtier server
--lmcache-port`), measured one after the other in one run with LMCache's own, unchanged MP client.

Each server (ZMQ transport, lmcache-driven transfers, CPU only, the same L1 size) on 127.0.0.1 and
one client process (this one) that registers a vLLM-shaped paged KV cache on POSIX shared memory
through LMCache's transfer context, exactly as LMCache's vLLM adapter does on a CPU worker with
`lmcache.mp.mp_transfer_mode: lmcache_driven`. Then, per round, a request of --chunks full chunks
of fresh tokens:
  STORE     one STORE of all its chunks; GB/s = KV bytes / (submit -> reply)
  LOOKUP    LOOKUP (void) then QUERY_PREFETCH_STATUS polled until it answers; the latency is
            submit -> first non-None answer, repeated --lookups times over stored requests
  RETRIEVE  one RETRIEVE of all its chunks into other blocks; GB/s as for STORE; every byte is
            compared with what was stored (a mismatch fails the run)
A STORE's reply arrives before its chunks are committed; a request is looked up until every chunk
is found before it is retrieved. Also printed: the server's RSS at the end, and a same-run
single-thread memcpy GB/s (bench/peer_limits.py) as this machine's ceiling.

Usage (repository root, the engine venv's Python; kvtier's side needs `make build`):
  $(scripts/engines-venv.sh)/bin/python bench/lmcache_peer.py [--servers lmcache kvtier]
      [--chunks 4] [--rounds 8] [--lookups 200] [--json out.json]
"""

import argparse
import importlib.metadata
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "python"))
sys.path.insert(0, str(REPO / "bench"))
from child_process import start_on_free_ports, tcp_open  # noqa: E402
import peer_limits  # noqa: E402

LAYERS, HEADS, HEAD_DIM, BLOCK = 32, 8, 128, 16
MODEL = "lmcache-peer"
INSTANCE = 7100
TIMEOUT_S = 120.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chunk-size", type=int, default=256, help="tokens per LMCache chunk")
    p.add_argument("--chunks", type=int, default=4, help="chunks per request")
    p.add_argument("--rounds", type=int, default=8, help="requests stored and retrieved")
    p.add_argument("--lookups", type=int, default=200, help="LOOKUP->status samples")
    p.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16")
    p.add_argument("--l1-size-gb", type=float, default=0.0,
                   help="server L1 size (default: every round's chunks stay under the 0.8 "
                   "eviction watermark)")
    p.add_argument("--servers", nargs="+", choices=("lmcache", "kvtier"),
                   default=["lmcache", "kvtier"], help="which servers to measure, in order")
    p.add_argument("--kvtier", type=Path, default=REPO / "build" / "kvtier",
                   help="the kvtier binary")
    p.add_argument("--json", type=Path, help="write the results here too")
    return p.parse_args()


def server_env():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(LMCACHE_DISABLE_BANNER="1", CUDA_VISIBLE_DEVICES="",
               LMCACHE_TRACK_USAGE="false", DO_NOT_TRACK="1")
    return env


def l1_size_gb(args, chunk_bytes):
    return args.l1_size_gb or args.rounds * args.chunks * chunk_bytes / 0.6 / (1 << 30)


def start_kvtier(args, chunk_bytes):
    """kvtier server with its LMCache front; returns (child, l1 GiB, the front's URL)."""
    l1_gb = l1_size_gb(args, chunk_bytes)

    def argv(port, http_port, lmcache_port):
        return [args.kvtier, "server", "--host", "127.0.0.1", "--port", port,
                "--http-port", http_port, "--lmcache-port", lmcache_port,
                "--chunk-size", args.chunk_size, "--l1-size-gb", f"{l1_gb:.3f}",
                "--eviction-policy", "LRU"]

    server = start_on_free_ports(
        "kvtier-lmcache", argv,
        lambda c, port, http_port, lmcache_port: "listening" in c.log_text()
        and tcp_open(lmcache_port),
        timeout_s=180, n_ports=3)
    return server, l1_gb, f"tcp://127.0.0.1:{server.ports[2]}"


def start_lmcache(args, chunk_bytes):
    """`lmcache server`; returns (child, l1 GiB, its URL)."""
    l1_gb = l1_size_gb(args, chunk_bytes)
    exe = Path(sys.executable).with_name("lmcache")

    def argv(port, http_port):
        return [exe, "server", "--host", "127.0.0.1", "--port", port,
                "--http-host", "127.0.0.1", "--http-port", http_port,
                "--chunk-size", args.chunk_size, "--l1-size-gb", f"{l1_gb:.3f}",
                "--no-l1-use-lazy", "--eviction-policy", "LRU", "--disable-metrics"]

    server = start_on_free_ports(
        "lmcache-server", argv,
        lambda c, port, http_port: "LMCache cache server is running" in c.log_text(),
        timeout_s=180, n_ports=2, env=server_env())
    return server, l1_gb, f"tcp://127.0.0.1:{server.ports[0]}"


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentile(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))]


class Peer:
    """LMCache's client side: a request client, a transfer context and a paged KV cache."""

    def __init__(self, url, args):
        import torch
        import zmq
        from lmcache.utils import EngineType
        from lmcache.v1.multiprocess.custom_types import IPCCacheServerKey
        from lmcache.v1.multiprocess.group_view import EngineGroupInfo
        from lmcache.v1.multiprocess.transfer_context import create_transfer_context
        from lmcache.v1.multiprocess.transport.factory import RequestClientFactory

        self.torch, self.Key, self.args = torch, IPCCacheServerKey, args
        self.blocks_per_chunk = args.chunk_size // BLOCK
        self.request_blocks = args.chunks * self.blocks_per_chunk
        # Block 0 is the engine's null block; then a store region and a retrieve region.
        num_blocks = 1 + 2 * self.request_blocks
        dtype = getattr(torch, args.dtype)
        self.kv = {f"model.layers.{i}.self_attn.attn":
                   torch.zeros(2, num_blocks, BLOCK, HEADS, HEAD_DIM, dtype=dtype)
                   for i in range(LAYERS)}
        self.ctx = zmq.Context()
        self.client = RequestClientFactory.create(url, context=self.ctx)
        chunk = self.client.get_chunk_size().result(timeout=TIMEOUT_S)
        assert chunk == args.chunk_size, (chunk, args.chunk_size)
        self.transfer = create_transfer_context(self.kv, instance_id=INSTANCE,
                                                req_client=self.client, mode="lmcache_driven")
        self.transfer.register(
            self.kv, MODEL, 1, self.blocks_per_chunk, TIMEOUT_S,
            layout_hints={"kv_layout": "NHD"},
            engine_group_infos=[EngineGroupInfo(engine_group_id=0,
                                                layer_indices=tuple(range(LAYERS)),
                                                tokens_per_block=BLOCK)],
            engine_type=EngineType.VLLM)
        self.src = list(range(1, 1 + self.request_blocks))
        self.dst = list(range(1 + self.request_blocks, 1 + 2 * self.request_blocks))
        self.gen = torch.Generator().manual_seed(38)

    @property
    def request_bytes(self):
        t = next(iter(self.kv.values()))
        return t[:, :self.request_blocks].numel() * t.element_size() * LAYERS

    def key(self, tokens, rid, worker_id):
        return self.Key(model_name=MODEL, world_size=1, worker_id=worker_id,
                        token_ids=tuple(tokens), start=0, end=len(tokens), request_id=rid,
                        num_kv_readers=1)

    def fill_source(self):
        for t in self.kv.values():
            t[:, self.src] = self.torch.randn(t[:, self.src].shape,
                                              generator=self.gen).to(t.dtype)

    def store(self, tokens, rid):
        event = self.transfer.create_recorded_event()
        t0 = time.perf_counter()
        ok = self.transfer.submit_store(rid, self.key(tokens, rid, 0), self.kv, [self.src],
                                        event, self.blocks_per_chunk).result(timeout=TIMEOUT_S)
        dt = time.perf_counter() - t0
        assert ok is True, f"STORE {rid} failed"
        return dt

    def lookup(self, tokens, rid):
        """(seconds from LOOKUP to the first status answer, chunks found)."""
        t0 = time.perf_counter()
        self.client.lookup(self.key(tokens, rid, None), 1)
        while True:
            hits = self.client.query_prefetch_status(rid).result(timeout=TIMEOUT_S)
            if hits is not None:
                return time.perf_counter() - t0, hits

    def retrieve(self, tokens, rid):
        for t in self.kv.values():
            t[:, self.dst] = 0
        event = self.transfer.create_recorded_event()
        t0 = time.perf_counter()
        ok = self.transfer.submit_retrieve(rid, self.key(tokens, rid, 0), self.kv, [self.dst],
                                           event, self.blocks_per_chunk).result(
                                               timeout=TIMEOUT_S)
        dt = time.perf_counter() - t0
        assert ok is True, f"RETRIEVE {rid} failed"
        for name, t in self.kv.items():
            same = self.torch.equal(t[:, self.dst].view(self.torch.int16),
                                    t[:, self.src].view(self.torch.int16))
            assert same, f"RETRIEVE {rid}: {name} differs from what was stored"
        return dt

    def end(self, rid):
        self.client.end_session(rid).result(timeout=TIMEOUT_S)

    def close(self):
        self.transfer.unregister().result(timeout=TIMEOUT_S)
        self.transfer.close()
        self.client.close()
        self.ctx.term()


def run(args, which):
    chunk_bytes = args.chunk_size * LAYERS * 2 * HEADS * HEAD_DIM * 2
    start = start_kvtier if which == "kvtier" else start_lmcache
    server, l1_gb, url = start(args, chunk_bytes)
    try:
        peer = Peer(url, args)
        try:
            return measure(peer, args, server, l1_gb)
        finally:
            peer.close()
    finally:
        server.stop(timeout_s=30)


def measure(peer, args, server, l1_gb):
    total = args.chunks * args.chunk_size
    stored, store_s, retrieve_s, lookups, commit_waits = [], [], [], [], []
    for r in range(args.rounds):
        tokens = [(r * 7919 + i) % 50000 + 1 for i in range(total)]
        peer.fill_source()
        store_s.append(peer.store(tokens, f"store-{r}"))
        # Committed after the reply: look up until every chunk is found.
        t0, n = time.perf_counter(), 0
        while True:
            rid = f"get-{r}-{n}"
            _, hits = peer.lookup(tokens, rid)
            if hits == args.chunks:
                break
            peer.end(rid)
            n += 1
            assert time.perf_counter() - t0 < TIMEOUT_S, f"round {r}: never fully found"
        commit_waits.append(n)
        retrieve_s.append(peer.retrieve(tokens, rid))
        peer.end(rid)
        stored.append(tokens)
    for i in range(args.lookups):
        rid = f"lookup-{i}"
        dt, hits = peer.lookup(stored[i % len(stored)], rid)
        assert hits == args.chunks, (rid, hits)
        lookups.append(dt)
        # A lookup read-locks what it found until a retrieve or the read TTL releases it;
        # free them (before the session ends: the release reads its lookup result).
        peer.client.free_lookup_locks(peer.key(stored[i % len(stored)], rid, None), 1).result(
            timeout=TIMEOUT_S)
        peer.end(rid)
    nbytes = peer.request_bytes
    return {
        "lmcache": importlib.metadata.version("lmcache"),
        "config": {"chunk_size": args.chunk_size, "chunks_per_request": args.chunks,
                   "layers": LAYERS, "heads": HEADS, "head_dim": HEAD_DIM, "block": BLOCK,
                   "dtype": args.dtype, "request_bytes": nbytes, "rounds": args.rounds,
                   "lookups": args.lookups, "l1_size_gb": round(l1_gb, 3)},
        "store_gbps": [nbytes / s / 1e9 for s in store_s],
        "retrieve_gbps": [nbytes / s / 1e9 for s in retrieve_s],
        "lookups_before_full_hit": commit_waits,
        "lookup_status_us": {"p50": percentile(lookups, 50) * 1e6,
                             "p99": percentile(lookups, 99) * 1e6,
                             "mean": statistics.fmean(lookups) * 1e6},
        "server_rss_mib": rss_mib(server.pid),
        "memcpy_gbps": peer_limits.memcpy_gbps(nbytes, rounds=3),
    }


def report(which, res):
    c = res["config"]
    med = statistics.median
    chunk_mib = c["request_bytes"] / c["chunks_per_request"] / 2**20
    server = "`kvtier server --lmcache-port`" if which == "kvtier" else "`lmcache server`"
    print(f"{server}, LMCache {res['lmcache']} client (CPU, lmcache-driven over POSIX shm), "
          f"chunk {c['chunk_size']} tokens x {c['layers']} layers x K/V x {c['heads']} heads x "
          f"{c['head_dim']} ({c['dtype']}) = {chunk_mib:.0f} MiB; "
          f"{c['chunks_per_request']} chunks per STORE/RETRIEVE, {c['rounds']} rounds, "
          f"{c['lookups']} lookups")
    print("| measure | median | min | max |")
    print("|---|---|---|---|")
    for name in ("store_gbps", "retrieve_gbps"):
        v = res[name]
        print(f"| {name.split('_')[0].upper()} GB/s | {med(v):.2f} | {min(v):.2f} | "
              f"{max(v):.2f} |")
    lk = res["lookup_status_us"]
    print(f"| LOOKUP->prefetch status p50 / p99 us | {lk['p50']:.0f} / {lk['p99']:.0f} | | |")
    print(f"| server RSS MiB (end) | {res['server_rss_mib']:.0f} | | |")
    print(f"| memcpy GB/s (1 thread, same run) | {res['memcpy_gbps']:.2f} | | |")
    print(f"lookups until a STORE was fully found: {res['lookups_before_full_hit']}")


def compare(results):
    """kvtier / lmcache per measure (medians), when both ran."""
    if set(results) != {"lmcache", "kvtier"}:
        return
    k, m = results["kvtier"], results["lmcache"]
    med = statistics.median
    print("| measure | lmcache server | kvtier | kvtier / lmcache |")
    print("|---|---|---|---|")
    for name in ("store_gbps", "retrieve_gbps"):
        a, b = med(m[name]), med(k[name])
        print(f"| {name.split('_')[0].upper()} GB/s (median) | {a:.2f} | {b:.2f} | "
              f"{b / a:.2f}x |")
    for q in ("p50", "p99"):
        a, b = m["lookup_status_us"][q], k["lookup_status_us"][q]
        print(f"| LOOKUP->status {q} us | {a:.0f} | {b:.0f} | {b / a:.2f}x |")
    a, b = m["server_rss_mib"], k["server_rss_mib"]
    print(f"| server RSS MiB | {a:.0f} | {b:.0f} | {b / a:.2f}x |")


def main():
    args = parse_args()
    if args.chunk_size % BLOCK:
        sys.exit(f"--chunk-size must be a multiple of {BLOCK}")
    results = {}
    for which in args.servers:
        results[which] = run(args, which)
        report(which, results[which])
    compare(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
