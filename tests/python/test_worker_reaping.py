"""A worker process that dies (kill -9) without unregistering: the server unregisters it and unmaps
its buffers within a housekeeping round, counts it, and keeps serving the other workers."""

import sys
import urllib.request

import numpy as np

import kvtier
from kvtier._process import Child, wait_until
from kvtier.server import LocalServer

# The child registers one KvCache under instance 77, says so, and waits to be killed.
_CHILD = """
import signal, sys, kvtier
client = kvtier.CacheClient(port=int(sys.argv[1]))
cache = kvtier.KvCache(num_layers=2, num_blocks=16, block_tokens=16, bytes_per_token=64)
cache.register(client, instance_id=77, model="reap")
print("registered", flush=True)
signal.pause()
"""


def metric(srv, name):
    text = urllib.request.urlopen(f"http://127.0.0.1:{srv.http_port}/metrics", timeout=10).read()
    for line in text.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def test_a_killed_worker_is_reaped_and_the_others_are_untouched():
    with LocalServer(l1_size_gb=0.0625, chunk_size=64) as srv:
        client = srv.client(timeout_ms=10000)
        ours = kvtier.KvCache(num_layers=2, num_blocks=16, block_tokens=16, bytes_per_token=64)
        ours.register(client, instance_id=1, model="reap")
        child = Child("worker", [sys.executable, "-c", _CHILD, srv.port])
        try:
            child.wait_log("registered", 20)
            assert client.stats()["registered_workers"] == 2
            child.kill()
            wait_until(lambda: client.stats()["registered_workers"] == 1, 20,
                       "the server to reap the killed worker")
            assert metric(srv, "kvtier_workers_reaped_total") == 1
            # Its instance is gone: a transfer for it is refused, with the server's message.
            try:
                client.store(77, np.arange(4, dtype=np.uint32), np.arange(64, dtype=np.uint32))
                raise AssertionError("a store for the reaped instance succeeded")
            except kvtier.KvtierError as e:
                assert e.code_name == "NOT_REGISTERED", e
            # Ours is still registered and serves, byte for byte.
            tokens = np.arange(64, dtype=np.uint32)  # one chunk: 4 blocks of 16 tokens
            ours.kv[:, :, :4] = 7
            assert client.store(1, np.arange(4, dtype=np.uint32), tokens)["stored_chunks"] == 1
            ours.kv[:, :, 4:8] = 0
            got = client.retrieve(1, np.arange(4, 8, dtype=np.uint32), tokens)
            assert got == 1 and (ours.kv[:, :, 4:8] == 7).all()
        finally:
            child.kill()
            child.remove_log()
        client.close()
