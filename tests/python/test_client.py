"""Single-worker behaviour of the Python client against a real server."""

import json

import numpy as np
import pytest

import kvtier
from conftest import CHUNK
from kvtier.server import LocalServer

LAYERS, BLOCKS, BT, BPT = 2, 32, 16, 32
PER_CHUNK = CHUNK // BT


@pytest.fixture
def worker(client, uid):
    """A registered KvCache (world_size 1) filled with random bytes in every block."""
    cache = kvtier.KvCache(LAYERS, BLOCKS, BT, BPT)
    cache.kv[:] = np.random.default_rng(uid).integers(0, 256, cache.shape, dtype=np.uint8)
    cache.register(client, uid, f"model-{uid}")
    yield cache
    client.unregister_kv_buffers(uid)


def tokens_for(uid, n):
    return np.arange(uid * 1000, uid * 1000 + n, dtype=np.uint32)


def test_default_port_is_the_servers():
    """One default port: the server's --port default, the Python client's and the vLLM
    connector's kvtier.port all come from wire::kDefaultServerPort."""
    import re
    import subprocess

    from kvtier.integrations._vllm_config import KEYS
    from kvtier.server import find_binary

    help_text = subprocess.run([find_binary(), "server", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert re.search(rf"--port\b[^\n]*={kvtier.DEFAULT_PORT}\b", help_text), help_text
    assert KEYS["kvtier.port"][0] == kvtier.DEFAULT_PORT


def test_server_info(client, server):
    info = client.server_info()
    assert info["chunk_size"] == CHUNK
    assert info["version"] == kvtier.PROTOCOL_VERSION
    assert info["hash"] in ("xxh3", "sha256")
    client.ping()


def test_store_retrieve_round_trip(client, worker, uid):
    tokens = tokens_for(uid, 2 * CHUNK)
    src = np.arange(2 * PER_CHUNK, dtype=np.uint32)
    reply = client.store(uid, src, tokens)
    assert reply == {"stored_chunks": 2, "present_chunks": 0, "skipped_chunks": 0}
    assert client.store(uid, src, tokens)["present_chunks"] == 2

    expected = worker.kv[:, :, src].copy()
    dst = list(range(BLOCKS - 1, BLOCKS - 1 - 2 * PER_CHUNK, -1))  # plain list also accepted
    worker.kv[:, :, dst] = 0
    assert client.retrieve(uid, dst, tokens.tolist()) == 2
    assert np.array_equal(worker.kv[:, :, dst], expected)


def test_skip_first_n_tokens_leaves_them_untouched(client, worker, uid):
    tokens = tokens_for(uid, CHUNK)
    src = np.arange(PER_CHUNK, dtype=np.uint32)
    assert client.store(uid, src, tokens)["stored_chunks"] == 1
    expected = worker.kv[:, :, src].reshape(LAYERS, 2, CHUNK, BPT).copy()

    dst = np.arange(PER_CHUNK, 2 * PER_CHUNK, dtype=np.uint32)
    worker.kv[:, :, dst] = 0xAB
    skip = BT + 5  # not block-aligned: a block is written from the middle
    assert client.retrieve(uid, dst, tokens, skip_first_n_tokens=skip) == 1
    got = worker.kv[:, :, dst].reshape(LAYERS, 2, CHUNK, BPT)
    assert (got[:, :, :skip] == 0xAB).all()
    assert np.array_equal(got[:, :, skip:], expected[:, :, skip:])


def test_partial_chunk_is_not_cached(client, worker, uid):
    tokens = tokens_for(uid, 2 * CHUNK)
    blocks = np.arange(2 * PER_CHUNK, dtype=np.uint32)
    partial = tokens[: CHUNK + CHUNK // 2]
    assert client.store(uid, blocks, partial)["stored_chunks"] == 1  # the tail is dropped

    rid = f"partial-{uid}"
    client.lookup(f"model-{uid}", 1, tokens, request_id=rid)
    assert client.wait_prefetch(rid) == 1
    assert client.retrieve(uid, blocks, tokens, request_id=rid) == 1
    client.end_session(rid)

    with pytest.raises(kvtier.KvtierError) as e:  # less than one chunk: nothing to store
        client.store(uid, blocks, tokens[: CHUNK - 1])
    assert e.value.code_name == "INVALID_ARGUMENT"


def test_hashes_instead_of_tokens(client, worker, uid):
    tokens = tokens_for(uid, 3 * CHUNK)
    hashes = kvtier.chunk_hashes(tokens, CHUNK, client.server_info()["hash"])
    assert len(hashes) == 3 and all(isinstance(h, bytes) and len(h) == 16 for h in hashes)
    blocks = np.arange(3 * PER_CHUNK, dtype=np.uint32)
    assert client.store(uid, blocks, hashes=hashes)["stored_chunks"] == 3

    # Stored by hash, found by tokens: the server hashes the same way.
    rid = f"hashes-{uid}"
    client.lookup(f"model-{uid}", 1, tokens, request_id=rid)
    assert client.wait_prefetch(rid) == 3
    client.free_lookup_locks(rid)
    client.lookup(f"model-{uid}", 1, hashes=[h.hex() for h in hashes[:2]], request_id=rid)
    assert client.wait_prefetch(rid) == 2
    client.end_session(rid)
    assert client.retrieve(uid, blocks, hashes=hashes, start=CHUNK, end=3 * CHUNK) == 2


def test_query_prefetch_status_without_lookup(client, uid):
    with pytest.raises(kvtier.KvtierError) as e:
        client.query_prefetch_status(f"never-{uid}")
    assert e.value.code_name == "NOT_FOUND"
    with pytest.raises(kvtier.KvtierError) as e:
        client.query_prefetch_status(f"never-{uid}", wait_us=1_000_000)
    assert e.value.code_name == "NOT_FOUND"


def test_query_prefetch_status_long_poll(client, worker, uid):
    tokens = tokens_for(uid, 2 * CHUNK)
    blocks = np.arange(2 * PER_CHUNK, dtype=np.uint32)
    assert client.store(uid, blocks, tokens)["stored_chunks"] == 2
    rid = f"long-poll-{uid}"
    client.lookup(f"model-{uid}", 1, tokens, request_id=rid)
    # Answered when the job is done (or after 10 s): never None for an L1-only lookup.
    assert client.query_prefetch_status(rid, wait_us=10_000_000) == 2
    client.end_session(rid)


@pytest.mark.parametrize("case, code_name", [
    ("unregistered", "NOT_REGISTERED"),
    ("block_out_of_range", "OUT_OF_RANGE"),
    ("end_not_aligned", "INVALID_ARGUMENT"),
])
def test_errors(client, worker, uid, case, code_name):
    tokens = tokens_for(uid, CHUNK)
    blocks = np.arange(PER_CHUNK, dtype=np.uint32)
    with pytest.raises(kvtier.KvtierError) as e:
        if case == "unregistered":
            client.store(uid + 99, blocks, tokens)
        elif case == "block_out_of_range":
            client.store(uid, np.full(PER_CHUNK, BLOCKS, dtype=np.uint32), tokens)
        else:
            client.retrieve(uid, blocks, tokens, end=CHUNK - 1)
    err = e.value
    assert isinstance(err, RuntimeError)
    assert err.code_name == code_name
    assert isinstance(err.code, int) and err.code > 0
    assert err.message and code_name in str(err)


def test_bad_arguments_raise_python_errors(client, worker, uid):
    with pytest.raises(ValueError):
        client.store(uid, [0, 1, 2, 3], [-1] * CHUNK)
    with pytest.raises(TypeError):
        client.store(uid, [0, 1, 2, 3], np.zeros(CHUNK, dtype=np.float32))
    with pytest.raises(ValueError):
        client.lookup("m", 1, hashes=[b"short"], request_id="x")


def test_stats_and_clear(client, worker, uid):
    client.store(uid, np.arange(2 * PER_CHUNK, dtype=np.uint32), tokens_for(uid, 2 * CHUNK))
    stats = client.stats()
    assert stats["l1_objects"] >= 2
    assert stats["registered_workers"] >= 1
    assert "status" not in stats
    assert client.clear() >= 2
    assert client.stats()["l1_objects"] == 0
    assert client.clear(tiers="all") == 0  # this server has no L2
    with pytest.raises(kvtier.KvtierError, match="INVALID_ARGUMENT.*tiers"):
        client.clear(tiers="disk")


def test_evict_drops_one_models_objects(client, worker, uid):
    client.store(uid, np.arange(2 * PER_CHUNK, dtype=np.uint32), tokens_for(uid, 2 * CHUNK))
    before = client.stats()["l1_objects"]
    assert client.evict(f"model-{uid}-not@") == 0
    assert client.evict(f"model-{uid}@") == 2
    assert client.stats()["l1_objects"] == before - 2
    with pytest.raises(kvtier.KvtierError, match="INVALID_ARGUMENT.*prefix"):
        client.evict("")


def test_numpy_view_is_zero_copy():
    buf = kvtier.HostKvBuffer(1 << 16)
    assert buf.size == 1 << 16 and buf.fd >= 0
    a, b = buf.array(), buf.array()
    assert a.dtype == np.uint8 and a.shape == (1 << 16,)
    a[123] = 42
    assert b[123] == 42
    assert np.shares_memory(a, b)
    del buf  # the views keep the mapping alive
    a[7] = 1
    assert b[7] == 1


def test_kv_cache_layout_matches_view():
    cache = kvtier.KvCache(3, 8, 16, 4)
    assert cache.kv.shape == (3, 2, 8, 16, 4)
    layout = cache.layout
    assert layout["num_blocks"] == 8 and layout["block_bytes"] == 16 * 4
    assert len(layout["regions"]) == 6
    base = cache.kv.ctypes.data
    for i, (fd_index, offset, stride) in enumerate(layout["regions"]):
        layer, kv = divmod(i, 2)
        assert fd_index == 0 and stride == layout["block_bytes"]
        assert cache.kv[layer, kv].ctypes.data - base == offset
    assert kvtier.paged_buffer_bytes(3, 8, 16, 4) == cache.buffer.size


def test_connect_failure_raises_kvtier_error():
    from kvtier.server import free_port
    with pytest.raises(kvtier.KvtierError) as e:
        kvtier.CacheClient(port=free_port(), timeout_ms=100)
    assert e.value.code_name == "TIMEOUT"


def test_lookup_and_wait_against_a_slow_l2(uid):
    """One round trip when the job is quick; None when it outlasts wait_us, and the long poll
    then answers once the job is done."""
    slow = json.dumps({"type": "mem", "delay_ms": 300, "deadline_ms": 10000})
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK, extra_args=["--l2-adapter", slow],
                     start_timeout_s=30) as srv:
        c = srv.client(timeout_ms=10000)
        cache = kvtier.KvCache(LAYERS, BLOCKS, BT, BPT)
        cache.register(c, uid, f"model-{uid}")
        tokens = tokens_for(uid, 2 * CHUNK)
        rid = f"slow-{uid}"
        # Not in L1, so the job asks the slow adapter.
        assert c.lookup_and_wait(f"model-{uid}", 1, tokens, request_id=rid, wait_us=50_000) is None
        assert c.query_prefetch_status(rid, wait_us=10_000_000) == 0
        c.end_session(rid)
        blocks = np.arange(2 * PER_CHUNK, dtype=np.uint32)
        assert c.store(uid, blocks, tokens)["stored_chunks"] == 2
        assert c.lookup_and_wait(f"model-{uid}", 1, tokens, request_id=rid) == 2
        c.end_session(rid)
        c.unregister_kv_buffers(uid)
        c.close()
