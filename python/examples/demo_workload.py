#!/usr/bin/env python3
"""`make run` demo: replays a chat-like workload against a local kvtier server.

Prompts share a handful of system prompts, so their leading chunks repeat. For each prompt the
scheduler looks the prefix up, the worker retrieves the cached chunks into fresh blocks and checks
every byte, "computes" the rest and stores it. The fake KV of a chunk is a deterministic function
of its token prefix, so any byte the cache returns can be verified.
"""

import argparse
import json
import tempfile
import hashlib
import signal
import sys
import time

import numpy as np

import kvtier
from kvtier.server import LocalServer

LAYERS, BLOCKS, BLOCK_TOKENS, BYTES_PER_TOKEN = 4, 1024, 16, 256
MODEL, INSTANCE = "demo-model", 1
VOCAB = 32000
SYSTEM_PROMPTS = 6


def build_prompts(count, seed):
    rng = np.random.default_rng(seed)
    systems = [rng.integers(0, VOCAB, rng.integers(300, 2100), dtype=np.uint32)
               for _ in range(SYSTEM_PROMPTS)]
    users = [rng.integers(0, VOCAB, rng.integers(40, 900), dtype=np.uint32) for _ in range(50)]
    return [np.concatenate([systems[rng.integers(len(systems))], users[rng.integers(len(users))]])
            for _ in range(count)]


def chunk_kv(tokens, chunk, chunk_size):
    """The KV blocks of one chunk, [layers, 2, blocks, block_tokens, bytes], from its prefix."""
    digest = hashlib.blake2b(tokens[: (chunk + 1) * chunk_size].tobytes(), digest_size=8).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "little"))
    shape = (LAYERS, 2, chunk_size // BLOCK_TOKENS, BLOCK_TOKENS, BYTES_PER_TOKEN)
    words = rng.integers(0, 2**64 - 1, int(np.prod(shape)) // 8, dtype=np.uint64, endpoint=True)
    return words.view(np.uint8).reshape(shape)


def report(msg):
    # On a TTY the progress line has no newline yet; start a fresh line.
    print(("\n" if sys.stdout.isatty() else "") + msg)


def prefix_keys(tokens, chunk_size):
    """One key per whole chunk, naming the chunk and every token before it (as the cache does)."""
    return [hashlib.blake2b(tokens[: (c + 1) * chunk_size].tobytes(), digest_size=8).digest()
            for c in range(len(tokens) // chunk_size)]


class Totals:
    def __init__(self):
        self.prompts = self.chunks = self.hits = self.failures = 0
        self.ideal_hits = 0  # leading chunks an unbounded cache would have held
        self.seen = set()    # ... the prefixes it holds
        self.retrieved_bytes = 0


def run_prompt(i, tokens, sched, worker, cache, chunk_size, rng, t):
    per_chunk = chunk_size // BLOCK_TOKENS
    object_bytes = LAYERS * 2 * chunk_size * BYTES_PER_TOKEN
    full = len(tokens) // chunk_size
    if full == 0:
        return
    rid = f"req-{i}"
    # Fresh blocks in a random order, zeroed so that a missed copy shows up.
    blocks = rng.permutation(BLOCKS)[: -(-len(tokens) // BLOCK_TOKENS)].astype(np.uint32)
    cache.kv[:, :, blocks] = 0

    hits = sched.lookup_and_wait(MODEL, 1, tokens, request_id=rid)  # one round trip

    got = 0
    if hits:
        got = worker.retrieve(INSTANCE, blocks, tokens, end=hits * chunk_size, request_id=rid)
        t.retrieved_bytes += got * object_bytes
        if got != hits:
            t.failures += 1
            report(f"prompt {i}: lookup promised {hits} chunks, retrieve copied {got}")
        for c in range(got):
            ids = blocks[c * per_chunk:(c + 1) * per_chunk]
            if not np.array_equal(cache.kv[:, :, ids], chunk_kv(tokens, c, chunk_size)):
                t.failures += 1
                report(f"prompt {i}: chunk {c} came back with wrong bytes")

    for c in range(got, full):  # the "prefill" of what the cache did not have
        cache.kv[:, :, blocks[c * per_chunk:(c + 1) * per_chunk]] = chunk_kv(tokens, c, chunk_size)
    if got < full:
        worker.store(INSTANCE, blocks, tokens, start=got * chunk_size, end=full * chunk_size,
                     request_id=rid)
    sched.end_session(rid)
    t.prompts += 1
    t.chunks += full
    t.hits += hits
    keys = prefix_keys(tokens, chunk_size)
    t.ideal_hits += next((c for c, k in enumerate(keys) if k not in t.seen), len(keys))
    t.seen.update(keys)


def summary(t, elapsed, stats):
    """Two lines: what ran is printed before; here the hits and the byte check."""
    per = lambda n: n / max(t.chunks, 1)  # noqa: E731
    print(f"  {t.prompts} prompts in {elapsed:.1f} s: hit rate {per(t.hits):.1%} of {t.chunks} "
          f"chunks (L1 {stats['lookup_hit_rate_l1']:.1%}, L2 {stats['lookup_hit_rate_l2']:.1%}); "
          f"an unbounded cache {per(t.ideal_hits):.1%}")
    print(f"  {t.retrieved_bytes / 2**20:.0f} MiB retrieved, every byte checked: "
          f"{'OK' if t.failures == 0 else f'{t.failures} FAILURES'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--l1-size-gb", type=float, default=0.0625,
                    help="small on purpose, so L1 evicts and the fs L2 serves older prefixes")
    ap.add_argument("--no-l2", action="store_true",
                    help="run without the fs L2 adapter (default: one in a temporary directory)")
    ap.add_argument("--binary", default=None, help="kvtier executable (default: $KVTIER_BIN)")
    args = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the server is stopped either way.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored

    prompts = build_prompts(args.prompts, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    t = Totals()
    tty = sys.stdout.isatty()
    l2_dir = tempfile.TemporaryDirectory(prefix="kvtier-demo-l2-")
    extra = [] if args.no_l2 else [
        "--l2-adapter", json.dumps({"type": "fs", "path": l2_dir.name})]
    with l2_dir, LocalServer(binary=args.binary, l1_size_gb=args.l1_size_gb,
                             chunk_size=args.chunk_size, prefault=True,
                             extra_args=extra) as srv:
        sched, worker = srv.client(timeout_ms=10000), srv.client(timeout_ms=10000)
        cache = kvtier.KvCache(LAYERS, BLOCKS, BLOCK_TOKENS, BYTES_PER_TOKEN)
        cache.register(worker, INSTANCE, MODEL)
        print(f"chat workload: {len(prompts)} prompts sharing {SYSTEM_PROMPTS} system prompts, "
              f"through a local kvtier server (chunks of {args.chunk_size} tokens, "
              f"L1 {args.l1_size_gb} GiB, L2 {'none' if args.no_l2 else 'a directory'})")
        start = time.perf_counter()
        for i, tokens in enumerate(prompts):
            run_prompt(i, tokens, sched, worker, cache, args.chunk_size, rng, t)
            if tty:
                print(f"\r[{i + 1:4d}/{len(prompts)}] hit rate {t.hits / max(t.chunks, 1):6.1%}",
                      end="", flush=True)
        elapsed = time.perf_counter() - start
        if tty:
            print("\r\033[K", end="")  # the progress line gives way to the summary
        stats = worker.stats()
        worker.unregister_kv_buffers(INSTANCE)
    summary(t, elapsed, stats)
    return 1 if t.failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ninterrupted; server stopped")
        sys.exit(130)
