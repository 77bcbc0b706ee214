"""kvtier.store.DistributedStore (Mooncake's Python API) against a real `kvtier master` and
`kvtier node` (subprocesses on free ports): dummy clients in two processes exchanging keys,
zero-copy batches through the mem pool, an embedded client in this process, error conventions."""

import ctypes
import os
import socket
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kvtier._process import Child
from kvtier.store import DistributedStore, ErrorCode, MooncakeDistributedStore, ReplicateConfig
from store_cluster import free_port, running_cluster

HERE = Path(__file__).parent
LEASE_MS = 500


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(LEASE_MS) as c:
        yield c



@pytest.fixture
def dummy(cluster):
    s = DistributedStore()
    assert s.setup_dummy(8 << 20, 4 << 20, cluster.node_address) == 0, cluster.logs()
    yield s
    s.close()


def ptr_view(ptr, size):
    """A numpy uint8 view over raw memory at `ptr` (no copy)."""
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))


# ---- (1) two dummy clients in two processes exchange keys through one node ----

def test_two_dummy_processes_exchange_keys(cluster, prefix):
    args = [cluster.node_address, prefix]
    procs = [Child(role, [sys.executable, HERE / "_store_dummy_peer.py", role, *args])
             for role in ("client1", "client2")]
    try:
        for p in procs:
            code = p.wait_exit(120)
            assert code == 0, f"{p.name} exited {code}:\n{p.log_text()}\n{cluster.logs()}"
    finally:
        for p in procs:
            p.stop()
            p.remove_log()


# ---- (2) zero-copy: mem pool, registered buffers, batch_put_from / batch_get_into ----

def test_zero_copy_batches_round_trip(dummy, prefix):
    chunk, n = 128 << 10, 4
    size = 2 * n * chunk
    ptr = dummy.alloc_from_mem_pool(size)
    assert ptr != 0
    assert dummy.register_buffer(ptr, size) == 0
    mem = ptr_view(ptr, size)
    rng = np.random.default_rng(7)
    mem[: n * chunk] = rng.integers(0, 256, n * chunk, dtype=np.uint8)
    mem[n * chunk:] = 0

    keys = [f"{prefix}-{i}" for i in range(n)]
    src = [ptr + i * chunk for i in range(n)]
    dst = [ptr + (n + i) * chunk for i in range(n)]
    assert dummy.batch_put_from(keys, src, [chunk] * n) == [0] * n
    assert dummy.batch_is_exist(keys) == [1] * n
    assert dummy.batch_get_into(keys, dst, [chunk] * n) == [chunk] * n
    assert np.array_equal(mem[n * chunk:], mem[: n * chunk])
    # The bytes API sees the same objects.
    assert dummy.get(keys[2]) == mem[2 * chunk: 3 * chunk].tobytes()

    # Single-key forms; a smaller object read into a larger buffer answers its own size.
    mem[n * chunk:] = 0
    assert dummy.put_from(f"{prefix}-small", ptr, 1000) == 0
    assert dummy.get_into(f"{prefix}-small", dst[0], chunk) == 1000
    assert np.array_equal(mem[n * chunk: n * chunk + 1000], mem[:1000])
    assert dummy.get_into(f"{prefix}-small", dst[0], 999) == ErrorCode.BUFFER_OVERFLOW
    assert dummy.get_into(f"{prefix}-missing", dst[0], chunk) == ErrorCode.OBJECT_NOT_FOUND

    assert dummy.unregister_buffer(ptr) == 0
    assert dummy.put_from(f"{prefix}-after-unregister", ptr, chunk) < 0
    assert dummy.is_exist(f"{prefix}-after-unregister") == 0


def test_zero_copy_rejects_memory_the_node_cannot_see(dummy, prefix):
    # Process memory outside the mem pool is not shared with the node.
    private = np.arange(4096, dtype=np.uint8)
    p = private.ctypes.data
    assert dummy.register_buffer(p, private.nbytes) < 0
    codes = dummy.batch_put_from([f"{prefix}-a", f"{prefix}-b"], [p, p + 2048], [2048, 2048])
    assert len(codes) == 2 and all(c < 0 for c in codes)
    assert dummy.batch_get_into([f"{prefix}-a"], [p], [2048])[0] < 0
    # Pool memory that was never registered is refused too.
    pooled = dummy.alloc_from_mem_pool(4096)
    assert pooled != 0
    assert dummy.put_from(f"{prefix}-c", pooled, 4096) < 0
    assert dummy.batch_is_exist([f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"]) == [0, 0, 0]
    # More than the pool holds.
    assert dummy.alloc_from_mem_pool(1 << 40) == 0


def test_batch_argument_lengths_must_match(dummy, prefix):
    ptr = dummy.alloc_from_mem_pool(4096)
    assert dummy.register_buffer(ptr, 4096) == 0
    keys = [f"{prefix}-0", f"{prefix}-1"]
    assert dummy.batch_put_from(keys, [ptr], [16, 16]) == [ErrorCode.INVALID_PARAMS] * 2
    assert dummy.batch_get_into(keys, [ptr, ptr], [16]) == [ErrorCode.INVALID_PARAMS] * 2
    assert dummy.batch_put_from([], [], []) == []
    assert dummy.batch_is_exist([]) == []
    with pytest.raises(TypeError):
        dummy.batch_is_exist("not-a-list")


def test_put_accepts_any_contiguous_buffer(dummy, prefix):
    payload = bytes(range(256)) * 64
    values = {
        "bytes": payload,
        "bytearray": bytearray(payload),
        "memoryview": memoryview(payload)[16:],
        "numpy": np.frombuffer(payload, dtype=np.uint32),
    }
    for name, value in values.items():
        key = f"{prefix}-{name}"
        assert dummy.put(key, value) == 0
        assert dummy.get(key) == bytes(memoryview(value).cast("B")), name
    assert dummy.put(b"bytes-key-" + prefix.encode(), b"x") == 0
    assert dummy.get(f"bytes-key-{prefix}") == b"x"  # a bytes key is its utf-8 str
    with pytest.raises(TypeError):
        dummy.put(f"{prefix}-str", "a str is not bytes")
    with pytest.raises(BufferError):
        dummy.put(f"{prefix}-strided", np.arange(64, dtype=np.uint8)[::2])
    assert dummy.put(f"{prefix}-cfg", b"v", ReplicateConfig(replica_num=1)) == 0
    assert dummy.get(f"{prefix}-cfg") == b"v"


# ---- (3) an embedded client in this process, a dummy of the node reading across nodes ----

def test_embedded_client_and_dummy_read_each_other(cluster, dummy, prefix):
    emb = MooncakeDistributedStore()
    try:
        assert emb.setup("localhost", "P2PHANDSHAKE", "16MB", "16MB", "tcp", "",
                         cluster.master_address) == 0
        host = emb.get_hostname()
        assert host.startswith("127.0.0.1:") and host != cluster.node_address
        assert dummy.get_hostname() == cluster.node_address

        # Written by the embedded node (placed local-first, in its own segment) and read by the
        # dummy through the CLI node, so the bytes cross the TCP data plane; and the reverse.
        a = os.urandom(300_000)
        assert emb.put(f"{prefix}-from-embedded", a) == 0
        assert dummy.get(f"{prefix}-from-embedded") == a
        b = os.urandom(200_000)
        assert dummy.put(f"{prefix}-from-dummy", b) == 0
        assert emb.get(f"{prefix}-from-dummy") == b
        assert emb.get_size(f"{prefix}-from-dummy") == len(b)

        # Embedded zero-copy works on any memory of this process.
        src = np.frombuffer(os.urandom(65536), dtype=np.uint8)
        dst = np.zeros(65536, dtype=np.uint8)
        assert emb.register_buffer(src.ctypes.data, src.nbytes) == 0
        assert emb.register_buffer(dst.ctypes.data, dst.nbytes) == 0
        keys = [f"{prefix}-zc0", f"{prefix}-zc1"]
        assert emb.batch_put_from(keys, [src.ctypes.data, src.ctypes.data + 32768],
                                  [32768, 32768]) == [0, 0]
        assert emb.batch_get_into(keys[::-1], [dst.ctypes.data, dst.ctypes.data + 32768],
                                  [32768, 32768]) == [32768, 32768]
        assert np.array_equal(dst[:32768], src[32768:]) and np.array_equal(dst[32768:], src[:32768])
        assert dummy.get(keys[1]) == src[32768:].tobytes()
    finally:
        assert emb.close() == 0
    assert emb.put(f"{prefix}-after-close", b"x") == ErrorCode.RPC_FAIL


def test_setup_with_a_config_dict_and_a_fixed_port(cluster, prefix):
    port = free_port()
    with DistributedStore() as s:
        assert s.setup({"local_hostname": f"127.0.0.1:{port}", "metadata_server": "P2PHANDSHAKE",
                        "global_segment_size": 8 << 20, "local_buffer_size": "8MB",
                        "master_server_addr": cluster.master_address}) == 0
        assert s.get_hostname() == f"127.0.0.1:{port}"
        assert s.put(f"{prefix}-k", b"dict") == 0
        assert s.get(f"{prefix}-k") == b"dict"
        assert s.setup({"local_hostname": "127.0.0.1"}) == ErrorCode.INVALID_PARAMS  # twice
    assert not s.is_set_up


def test_setup_refuses_what_it_cannot_do(cluster):
    s = DistributedStore()
    master = cluster.master_address
    assert s.setup("127.0.0.1", "", "sixteen", "16MB", "tcp", "", master) == -600
    assert s.setup("127.0.0.1", "", -1, "16MB", "tcp", "", master) == -600
    assert s.setup("127.0.0.1:99999", "", "16MB", "16MB", "tcp", "", master) == -600
    assert s.setup("127.0.0.1", "", "16MB", "16MB", "tcp", "", "redis://h:2379") == -600
    assert s.setup("127.0.0.1", "", "16MB", "16MB", "tcp", "", "etcd://no-port") == -600
    assert s.setup({"metadata_server": "x"}) == -600  # no local_hostname
    assert s.setup_dummy("1GB?", 0, cluster.node_address) == -600
    # No node listens on this port's socket.
    assert s.setup_dummy(0, 1 << 20, f"127.0.0.1:{free_port()}") < 0
    assert not s.is_set_up
    assert s.put("k", b"v") == ErrorCode.RPC_FAIL


# ---- (4) error conventions ----

def test_calls_before_setup_and_after_close_answer_rpc_fail(cluster):
    s = DistributedStore()
    for _ in range(2):  # before setup; then after a setup and close
        assert s.put("k", b"v") == -900
        assert s.get("k") == b""
        assert s.get_size("k") == -900
        assert s.is_exist("k") == -900
        assert s.batch_is_exist(["a", "b"]) == [-900, -900]
        assert s.remove("k") == -900
        assert s.remove_all() == -900
        assert s.alloc_from_mem_pool(4096) == 0
        assert s.register_buffer(4096, 4096) == -900
        assert s.unregister_buffer(4096) == -900
        assert s.put_from("k", 4096, 16) == -900
        assert s.get_into("k", 4096, 16) == -900
        assert s.batch_put_from(["k"], [4096], [16]) == [-900]
        assert s.batch_get_into(["k"], [4096], [16]) == [-900]
        assert s.get_hostname() == ""
        assert s.close() == 0  # idempotent
        assert s.setup_dummy(0, 1 << 20, cluster.node_address) == 0
        assert s.close() == 0


def test_missing_keys_and_removal(dummy, prefix):
    missing = f"{prefix}-missing"
    assert dummy.get(missing) == b""
    assert dummy.get_size(missing) == ErrorCode.OBJECT_NOT_FOUND == -704
    assert dummy.is_exist(missing) == 0
    assert dummy.remove(missing) == -704
    assert dummy.put(f"{prefix}-here", b"1") == 0
    assert dummy.batch_is_exist([f"{prefix}-here", missing]) == [1, 0]
    assert dummy.put(f"{prefix}-gone", b"2") == 0
    assert dummy.remove(f"{prefix}-gone") == 0  # a put takes no lease
    assert dummy.is_exist(f"{prefix}-gone") == 0
    assert dummy.put("", b"x") < 0  # an empty key is invalid


def test_remove_all_counts_what_it_removed(cluster, prefix):
    with DistributedStore() as s:
        assert s.setup_dummy(0, 1 << 20, cluster.node_address) == 0
        keys = [f"{prefix}-{i}" for i in range(5)]
        for k in keys:
            assert s.put(k, k.encode()) == 0
        assert s.remove_all() >= len(keys)
        assert s.batch_is_exist(keys) == [0] * len(keys)


def test_setup_dummy_releases_the_gil():
    # A fake node that reads the dummy's hello and hangs up. This thread returns from recv() into
    # Python, and hangs up, while the other thread waits inside setup_dummy for the reply only if
    # that call released the GIL; had it not, setup_dummy would first wait out its 30 s request
    # timeout (the result is RPC_FAIL either way, so the bound below is what tells them apart:
    # the hang-up reaches it within milliseconds).
    port = free_port()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(b"\0kvtier-node-%d" % port)
        listener.listen(1)
        listener.settimeout(60)
        result = []
        store = DistributedStore()
        worker = threading.Thread(
            target=lambda: result.append(store.setup_dummy(0, 1 << 20, f"127.0.0.1:{port}")))
        started = time.monotonic()
        worker.start()
        try:
            conn, _ = listener.accept()
            with conn:
                assert conn.recv(65536)  # the hello: setup_dummy now waits for the reply
        finally:
            worker.join(60)
    assert result == [ErrorCode.RPC_FAIL]
    assert time.monotonic() - started < 15, "setup_dummy held the GIL while it waited"


def test_error_code_enum():
    assert ErrorCode.OBJECT_NOT_FOUND == -704
    assert ErrorCode(-900) is ErrorCode.RPC_FAIL
    assert ErrorCode.OK == 0 and ErrorCode.INVALID_PARAMS == -600
    assert ErrorCode.OBJECT_HAS_LEASE == -706 and ErrorCode.LEASE_EXPIRED == -707
