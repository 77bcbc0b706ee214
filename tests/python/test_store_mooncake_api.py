"""The Mooncake store calls beyond the basic ones (docs/store/python.md), against a real
`kvtier master` + `kvtier node`, each test in both modes: a dummy client of the node and an
embedded node in this process. Bytes are always verified; the `mooncake` compatibility package
is imported from the build tree the way an engine would import it."""

import ctypes
import importlib
import json
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

import kvtier
from kvtier.store import (BufferHandle, ErrorCode, MooncakeDistributedStore,
                          MooncakeHostMemAllocator, ReplicaStatus, ReplicateConfig,
                          SoftPinAction)
from kvtier.server import find_binary
from kvtier._process import free_port, wait_until
from launchers import NODE_BANNER, spawn_kvtier
from store_cluster import running_cluster

LEASE_MS = 300
UNAVAILABLE = -1011  # Mooncake's UNAVAILABLE_IN_CURRENT_MODE


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(LEASE_MS) as c:
        yield c


def view(ptr, size):
    return np.ctypeslib.as_array((ctypes.c_uint8 * size).from_address(ptr))


@pytest.fixture(scope="module")
def host_memory():
    """One MooncakeHostMemAllocator region, as SGLang's standalone host pool allocates it."""
    allocator = MooncakeHostMemAllocator()
    size = 4 << 20
    ptr = allocator.alloc(size)
    assert ptr != 0
    yield ptr, size
    assert allocator.free(ptr) == 0
    assert allocator.free(ptr) == -1  # twice: not an allocation any more


def test_host_allocator_memory_is_zero_copy_registrable(store, host_memory, prefix):
    ptr, size = host_memory
    assert store.register_buffer(buffer_ptr=ptr, size=size) == 0
    assert store.register_buffer(ptr + 4096, 4096) == 0  # inside it: already shared
    mem = view(ptr, size)
    half = size // 2
    mem[:half] = np.frombuffer(os.urandom(half), dtype=np.uint8)
    mem[half:] = 0
    keys = [f"{prefix}-{i}" for i in range(4)]
    part = half // 4
    src = [ptr + i * part for i in range(4)]
    dst = [ptr + half + i * part for i in range(4)]
    assert store.batch_put_from(keys, buffer_ptrs=src, sizes=[part] * 4,
                                config=ReplicateConfig()) == [0] * 4
    assert store.batch_get_into(keys, buffer_ptrs=dst, sizes=[part] * 4) == [part] * 4
    assert np.array_equal(mem[half:], mem[:half])
    assert store.get(keys[1]) == mem[part:2 * part].tobytes()
    assert store.unregister_buffer(buffer_ptr=ptr) == 0


def test_freed_host_memory_is_never_taken_for_a_new_allocation(store, prefix):
    # The node still maps a freed allocation's memfd; were a new allocation placed at the same
    # address, the client would take it for the shared one and the node would read stale bytes.
    allocator = MooncakeHostMemAllocator()
    old = allocator.alloc(1 << 20)
    assert old != 0 and store.register_buffer(old, 1 << 20) == 0
    assert allocator.free(old) == 0
    new = allocator.alloc(1 << 20)
    assert new != 0 and new != old
    assert store.register_buffer(new, 1 << 20) == 0
    data = os.urandom(1 << 20)
    view(new, 1 << 20)[:] = np.frombuffer(data, dtype=np.uint8)
    assert store.put_from(f"{prefix}-k", new, 1 << 20) == 0
    assert store.get(f"{prefix}-k") == data
    assert allocator.free(new) == 0


def test_multi_buffer_calls_gather_and_scatter(store, prefix):
    rng = np.random.default_rng(3)
    # Per key, three layers' blocks of different sizes (vLLM / SGLang MLA pools).
    sizes = [[4096, 1000, 7], [1, 2, 3], [65536, 65536, 12345]]
    srcs = [[rng.integers(0, 256, n, dtype=np.uint8) for n in row] for row in sizes]
    keys = [f"{prefix}-{i}" for i in range(len(sizes))]
    ptrs = [[a.ctypes.data for a in row] for row in srcs]
    # Private memory is fine in both modes: these calls gather and scatter through a copy.
    assert store.batch_put_from_multi_buffers(keys, ptrs, sizes, ReplicateConfig()) == [0] * 3
    for k, row in zip(keys, srcs):
        assert store.get(k) == b"".join(a.tobytes() for a in row)
    dsts = [[np.zeros(n, dtype=np.uint8) for n in row] for row in sizes]
    got = store.batch_get_into_multi_buffers(
        keys, [[a.ctypes.data for a in row] for row in dsts], sizes)
    assert got == [sum(row) for row in sizes]
    for s_row, d_row in zip(srcs, dsts):
        for a, b in zip(s_row, d_row):
            assert np.array_equal(a, b)
    # Buffers too small for the object; a missing key; lists that do not match.
    small = np.zeros(10, dtype=np.uint8)
    assert store.batch_get_into_multi_buffers([keys[0], f"{prefix}-missing"],
                                              [[small.ctypes.data]] * 2, [[10]] * 2) == [
        ErrorCode.BUFFER_OVERFLOW, ErrorCode.OBJECT_NOT_FOUND]
    assert store.batch_put_from_multi_buffers(keys[:2], [[1]], [[1], [1]]) == [-600, -600]
    assert store.batch_get_into_multi_buffers(keys[:1], [[1, 2]], [[1]]) == [-600]


def test_bytes_batches_parts_and_buffer_handles(store, prefix):
    keys = [f"{prefix}-{i}" for i in range(3)]
    values = [os.urandom(n) for n in (10, 70_000, 1)]
    assert store.put_batch(keys, values) == 0
    assert store.get_batch(keys + [f"{prefix}-missing"]) == values + [b""]
    assert store.put_batch(keys, values[:1]) == ErrorCode.INVALID_PARAMS

    meta, kv = b"header:28 bytes of metadata.", np.arange(1000, dtype=np.uint16)
    assert store.put_parts(f"{prefix}-parts", meta, kv, config=ReplicateConfig()) == 0
    assert store.get(f"{prefix}-parts") == meta + kv.tobytes()
    with pytest.raises(TypeError):
        store.put_parts(f"{prefix}-bad", "text is not bytes-like")

    h = store.get_buffer(keys[1])
    assert isinstance(h, BufferHandle) and h.size() == len(h) == 70_000 and h.ptr() != 0
    assert bytes(memoryview(h)) == values[1]
    assert np.array_equal(np.frombuffer(h, dtype=np.uint8), np.frombuffer(values[1], np.uint8))
    assert view(h.ptr(), 10).tobytes() == values[1][:10]
    handles = store.batch_get_buffer([keys[0], f"{prefix}-missing", keys[2]])
    assert [bytes(memoryview(x)) if x is not None else None for x in handles] == [
        values[0], None, values[2]]
    assert store.get_buffer(f"{prefix}-missing") is None


def test_replica_descriptors_say_memory_and_ask_no_lease(store, prefix):
    k = f"{prefix}-k"
    assert store.put(k, b"v") == 0
    got = store.batch_get_replica_desc([k, f"{prefix}-missing"])
    assert set(got) == {k, f"{prefix}-missing"} and got[f"{prefix}-missing"] == []
    (desc,) = got[k]
    assert desc.is_memory_replica() and not desc.is_disk_replica()
    assert not desc.is_local_disk_replica() and desc.status == ReplicaStatus.COMPLETE
    assert desc.get_memory_descriptor().buffer_descriptor.size == 0  # locations not exported
    assert len(store.get_replica_desc(k)) == 1
    assert store.remove(k) == 0  # no lease was taken


def test_removal_forms(store, prefix):
    keys = [f"{prefix}-{i}" for i in range(4)]
    for k in keys:
        assert store.put(k, k.encode()) == 0
    assert store.batch_remove([keys[0], f"{prefix}-missing", keys[1]], force=False) == [
        0, ErrorCode.OBJECT_NOT_FOUND, 0]
    assert store.remove(keys[2], force=True) == 0
    assert store.batch_is_exist(keys) == [0, 0, 0, 1]
    assert store.remove_all(force=True) >= 1
    assert store.is_exist(keys[3]) == 0
    assert store.batch_remove([]) == []


def test_force_overrides_a_readers_lease(store, prefix):
    k = f"{prefix}-leased"
    assert store.put(k, b"old bytes") == 0
    assert store.get(k) == b"old bytes"  # a read lease for 5 s
    assert store.remove(k) == ErrorCode.OBJECT_HAS_LEASE
    assert store.batch_remove([k]) == [ErrorCode.OBJECT_HAS_LEASE]
    assert store.batch_remove([k], force=True) == [0]
    assert store.is_exist(k) == 0
    assert store.put(k, b"new") == 0  # the key is free at once; the old space waits
    assert store.get(k) == b"new"
    store.remove_all()
    assert store.is_exist(k) == 1  # leased again by the get: only force takes it
    assert store.remove_all(force=True) >= 1
    assert store.is_exist(k) == 0


def test_remove_by_regex(store, prefix):
    ours = [f"{prefix}/layer{i}" for i in range(3)] + [f"{prefix}/meta"]
    for k in ours:
        assert store.put(k, b"x") == 0
    assert store.get(ours[0]) == b"x"  # leased: skipped without force
    pattern = "^" + re.escape(prefix) + "/layer[0-9]+$"
    assert store.remove_by_regex(pattern) == 2
    assert store.batch_is_exist(ours) == [1, 0, 0, 1]
    assert store.remove_by_regex(pattern, force=True) == 1
    assert store.remove_by_regex(re.escape(prefix) + "/nothing") == 0
    assert store.remove_by_regex("(unclosed") == ErrorCode.INVALID_PARAMS
    assert store.remove_by_regex("x" * 5000) == ErrorCode.INVALID_PARAMS
    assert store.is_exist(ours[3]) == 1
    assert store.remove_by_regex(re.escape(prefix), force=False) == 1


def test_upsert_replaces_values(store, prefix):
    k, other = f"{prefix}-k", f"{prefix}-other"
    assert store.upsert(k, b"first") == 0  # an insert
    assert store.put(k, b"ignored") == 0   # first writer wins for put ...
    assert store.upsert(k, b"second value") == 0  # ... upsert replaces
    assert store.upsert_parts(k, b"third ", b"in parts") == 0
    assert store.upsert_batch([k, other], [b"fourth", b"new"]) == 0
    expected = b"fourth"
    src = np.frombuffer(os.urandom(4096), dtype=np.uint8)
    if store.register_buffer(src.ctypes.data, src.nbytes) == 0:  # embedded: any memory
        assert store.batch_upsert_from([k], [src.ctypes.data], [4096]) == [0]
        assert store.upsert_from(k, src.ctypes.data + 1, 100) == 0
        expected = src[1:101].tobytes()
    assert store.get_batch([k, other]) == [expected, b"new"]
    # A reader's lease does not block an upsert: the old bytes' space waits for the lease.
    assert store.upsert(k, b"while leased") == 0
    assert store.get(k) == b"while leased"
    assert store.batch_upsert_from([k, k], [0], [1]) == [ErrorCode.INVALID_PARAMS] * 2


def test_health_and_calls_that_need_hardware(cluster, store):
    assert store.health_check() == 0
    assert store.init_all("rdma", "mlx5_0", 1 << 30) == UNAVAILABLE
    assert store.get_tensor_into_cuda("k", None) == UNAVAILABLE
    assert store.get_replica_desc("missing") == []
    fresh = MooncakeDistributedStore()
    assert fresh.health_check() == 1
    assert fresh.setup_dummy(0, 1 << 20, cluster.node_address) == 0
    assert fresh.health_check() == 0
    fresh.close()
    assert fresh.health_check() == 1


def test_a_dummy_without_a_local_buffer_still_puts_and_gets_bytes(cluster, prefix):
    # Mooncake's dummy put/get carry the bytes themselves; here they go through the staging
    # area shared with the node when local_buffer_size is 0.
    with MooncakeDistributedStore() as s:
        assert s.setup_dummy(0, 0, cluster.node_address) == 0
        values = [os.urandom(n) for n in (1, 1000, 3 << 20)]
        keys = [f"{prefix}-{i}" for i in range(len(values))]
        assert s.put_batch(keys, values) == 0
        assert s.get_batch(keys + [f"{prefix}-missing"]) == values + [b""]
        assert bytes(memoryview(s.get_buffer(keys[2]))) == values[2]


def test_the_library_is_quiet_in_an_engine_unless_asked(cluster, prefix):
    # An embedded store in an engine's process: info lines only with KVTIER_LOG_LEVEL=info.
    script = "\n".join([
        "import sys",
        "from kvtier.store import MooncakeDistributedStore",
        "s = MooncakeDistributedStore()",
        "assert s.setup('127.0.0.1', 'P2PHANDSHAKE', '8MB', '8MB', 'tcp', '', sys.argv[1]) == 0",
        "assert s.put(sys.argv[2], b'v') == 0",
        "s.close()"])

    def stderr_of(level=None):
        env = {k: v for k, v in os.environ.items() if k != "KVTIER_LOG_LEVEL"}
        if level:
            env["KVTIER_LOG_LEVEL"] = level
        run = subprocess.run([sys.executable, "-c", script, cluster.master_address, prefix],
                             capture_output=True, text=True, timeout=60, env=env)
        assert run.returncode == 0, run.stderr
        return run.stderr

    assert "data plane listening" not in stderr_of()
    assert "data plane listening" in stderr_of("info")


def test_setup_dict_as_lmcache_and_vllm_spell_it(cluster, prefix):
    with MooncakeDistributedStore() as s:
        assert s.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                        "master_server_address": cluster.master_address, "protocol": "rdma",
                        "device_name": "mlx5_0", "global_segment_size": "16MB",
                        "local_buffer_size": "8MB"}) == 0
        assert s.put(f"{prefix}-k", b"dict") == 0 and s.get(f"{prefix}-k") == b"dict"


def test_setup_with_rdma_runs_over_tcp(cluster, prefix):
    # vLLM's MooncakeStoreConnector default config says protocol "rdma".
    with MooncakeDistributedStore() as s:
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", "16MB", "16MB", "rdma", "mlx5_0",
                       cluster.master_address, enable_client_http_server=True) == 0
        assert s.put(f"{prefix}-k", b"over tcp") == 0
        assert s.get(f"{prefix}-k") == b"over tcp"


def test_pinned_objects_outlive_eviction(prefix):
    """A store of 16 MB filled with 1 MiB puts: hard pins are never evicted, soft pins only once
    no unpinned object is left to evict."""
    hard, soft = ReplicateConfig(), ReplicateConfig()
    hard.with_hard_pin = True
    soft.soft_pin_action = SoftPinAction.ENABLE
    value = os.urandom(1 << 20)
    with running_cluster(LEASE_MS, segment="16MB") as c:
        s = MooncakeDistributedStore()
        assert s.setup_dummy(0, 2 << 20, c.node_address) == 0
        assert s.put(f"{prefix}-hard", value, hard) == 0
        assert s.put(f"{prefix}-soft", value, soft) == 0
        plain = [f"{prefix}-plain-{i}" for i in range(40)]
        for k in plain:
            assert s.put(k, value) == 0, c.logs()  # each one evicts older ones when full
        assert s.batch_is_exist([f"{prefix}-hard", f"{prefix}-soft"]) == [1, 1]
        assert s.batch_is_exist(plain[:10]) == [0] * 10  # the oldest unpinned ones went
        # Soft pins go too once only pinned objects are left; the hard pin never does.
        soft_keys = [f"{prefix}-soft-{i}" for i in range(40)]
        for k in soft_keys:
            assert s.put(k, value, soft) == 0, c.logs()
        assert s.is_exist(f"{prefix}-hard") == 1
        assert s.is_exist(f"{prefix}-soft") == 0 and s.is_exist(soft_keys[-1]) == 1
        assert s.get(f"{prefix}-hard") == value
        s.close()


def test_soft_pins_lapse_after_their_ttl(prefix):
    """A master that never evicts a live soft pin (Mooncake's flag spelling): a pin of 1 ms has
    lapsed by the time the store is full and goes like any object; a pin of 10 min stays."""
    short, long_ = ReplicateConfig(), ReplicateConfig()
    short.soft_pin_action = long_.soft_pin_action = SoftPinAction.ENABLE
    short.soft_pin_ttl_ms, long_.soft_pin_ttl_ms = 1, 600_000
    value = os.urandom(1 << 20)
    with running_cluster(LEASE_MS, segment="16MB",
                         master_args=["--allow_evict_soft_pinned_objects=false"]) as c:
        s = MooncakeDistributedStore()
        assert s.setup_dummy(0, 2 << 20, c.node_address) == 0
        assert s.put(f"{prefix}-short", value, short) == 0
        assert s.put(f"{prefix}-long", value, long_) == 0
        for i in range(40):
            assert s.put(f"{prefix}-plain-{i}", value) == 0, c.logs()
        assert s.batch_is_exist([f"{prefix}-short", f"{prefix}-long"]) == [0, 1]
        # Filled with live soft pins only, the store refuses more rather than evict them.
        codes = [s.put(f"{prefix}-pinned-{i}", value, long_) for i in range(40)]
        assert codes[0] == 0 and codes[-1] == ErrorCode.NO_AVAILABLE_HANDLE, codes
        assert s.get(f"{prefix}-long") == value
        s.close()


def test_replicate_config_has_mooncakes_fields():
    c = ReplicateConfig()
    assert (c.replica_num, c.with_hard_pin, c.preferred_segments, c.preferred_segment) == (
        1, False, [], "")
    assert c.soft_pin_action == SoftPinAction.PRESERVE and c.soft_pin_ttl_ms is None
    assert c.group_ids is None and c.prefer_alloc_in_same_node is False
    c.preferred_segment = "127.0.0.1:1"
    assert "127.0.0.1:1" in str(c)
    with pytest.raises(TypeError):
        ReplicateConfig(no_such_field=1)


def test_mooncake_package_is_kvtier_underneath(cluster, prefix):
    compat = Path(kvtier.__file__).resolve().parents[2] / "mooncake_compat"
    assert (compat / "mooncake" / "store.py").is_file(), "build/mooncake_compat is missing"
    sys.path.insert(0, str(compat))
    try:
        mstore = importlib.import_module("mooncake.store")
        from mooncake.store import MooncakeDistributedStore as M
        from mooncake.store import MooncakeHostMemAllocator as A
        from mooncake.store import ReplicateConfig as R
        from mooncake.store import SoftPinAction as S
        assert importlib.import_module("mooncake").IS_KVTIER
        assert (M, A, S) == (MooncakeDistributedStore, MooncakeHostMemAllocator, SoftPinAction)
        assert mstore.ErrorCode.OBJECT_NOT_FOUND == -704
        s = M()
        assert s.setup_dummy(0, 1 << 20, cluster.node_address) == 0
        assert s.put(f"{prefix}-k", b"via mooncake.store", R()) == 0
        assert s.get(f"{prefix}-k") == b"via mooncake.store"
        # Mooncake's tensor helpers: header and payload apart, joined by put_from_with_metadata.
        torch = pytest.importorskip("torch")
        t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        header, ptr, nbytes, owner = mstore._serialize_tensor(t)
        assert len(header) == mstore._tensor_metadata_size() == 304 and nbytes == 48
        hbuf = np.frombuffer(header, dtype=np.uint8).copy()
        assert s.put_from_with_metadata(f"{prefix}-t", ptr, hbuf.ctypes.data, nbytes, 304) == 0
        del owner
        assert torch.equal(s.get_tensor(f"{prefix}-t"), t)
        assert torch.equal(mstore._deserialize_tensor(s.get(f"{prefix}-t")), t)
        s.close()
    finally:
        sys.path.remove(str(compat))
        for name in ("mooncake.store", "mooncake"):
            sys.modules.pop(name, None)


def test_concurrent_multi_buffer_clients(cluster, prefix):
    """Four threads, each with its own dummy client, put and read back their own keys."""
    errors = []

    def worker(t):
        s = MooncakeDistributedStore()
        try:
            if s.setup_dummy(0, 4 << 20, cluster.node_address) != 0:
                errors.append(f"thread {t}: setup_dummy failed")
                return
            for i in range(20):
                parts = [np.frombuffer(os.urandom(n), dtype=np.uint8) for n in (3000, 5000)]
                key = f"{prefix}-{t}-{i}"
                codes = s.batch_put_from_multi_buffers(
                    [key], [[p.ctypes.data for p in parts]], [[p.nbytes for p in parts]])
                out = [np.zeros(p.nbytes, dtype=np.uint8) for p in parts]
                got = s.batch_get_into_multi_buffers(
                    [key], [[o.ctypes.data for o in out]], [[o.nbytes for o in out]])
                if codes != [0] or got != [8000] or not all(
                        np.array_equal(a, b) for a, b in zip(parts, out)):
                    errors.append(f"thread {t} key {i}: {codes} {got}")
        finally:
            s.close()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert errors == [], cluster.logs()


def test_mooncake_launch_flags_run_master_and_node(prefix):
    """A mooncake_master / mooncake_client command line, with only the binary name changed."""
    rpc, http, node_port = free_port(), free_port(), free_port()
    master = spawn_kvtier("master", [
        "master", f"--rpc_port={rpc}", "--rpc_address=127.0.0.1", f"--metrics_port={http}",
        "--default_kv_lease_ttl=300", "--eviction_high_watermark_ratio=0.9",
        "--eviction_ratio=0.05", "--client_ttl=10", "--enable_http_metadata_server",
        "--http_metadata_server_port=8080", "--rpc_thread_num", "4",
        "--enable_multi_tenants=false"])
    node = None
    try:
        master.wait_port(rpc, 20.0)
        node = spawn_kvtier("node", [
            "node", "--host=127.0.0.1", f"--port={node_port}",
            f"--master_server_address=127.0.0.1:{rpc}", "--global_segment_size=16MB",
            "--metadata_server=http://127.0.0.1:8080/metadata", "--protocol=rdma",
            "--device_names=mlx5_0", "--local_buffer_size=0", "--tenant_id=default",
            "--enable_offload=false", "--no-prefault"])
        node.wait_log(NODE_BANNER, 20.0)
        s = MooncakeDistributedStore()
        node.wait_ready(lambda: s.setup_dummy(0, 1 << 20, f"127.0.0.1:{node_port}") == 0, 20,
                        "setup_dummy")
        key = f"{prefix}-k"
        node.wait_ready(lambda: s.put(key, b"launched the Mooncake way") == 0, 20, "a put")
        assert s.get(key) == b"launched the Mooncake way"
        assert s.remove(key) == ErrorCode.OBJECT_HAS_LEASE  # the get's 300 ms lease ...
        # ... ends well before the 5 s default: --default_kv_lease_ttl took effect.
        wait_until(lambda: s.remove(key) == 0, 3.0, "the get's 300 ms lease to end")
        check_mooncake_http_api(http, s, prefix, f"127.0.0.1:{node_port}")
        s.close()
        assert "ignoring Mooncake flag --enable_http_metadata_server" in master.log_text()
        assert "ignoring Mooncake flag --protocol" in node.log_text()
    finally:
        for p in (node, master):
            if p is not None:
                p.stop()
                p.remove_log()
    # A Mooncake spelling with a bad value is refused as the kvtier spelling is.
    bad = subprocess.run([find_binary(), "master", "--eviction_ratio=2"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "--eviction-ratio must be in [0, 1]" in bad.stderr
    # A feature kvtier lacks is refused, not run without: another tenant would share the default
    # tenant's keys; offload asked for would not happen.
    for argv, says in ((["node", "--tenant_id=team-b"], "only 'default' is accepted"),
                       (["node", "--enable_offload"], "kvtier has no SSD offload"),
                       (["master", "--enable_multi_tenants=true"], "kvtier has no tenants")):
        r = subprocess.run([find_binary(), *argv], capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and says in r.stderr, (argv, r.stderr)


def test_master_and_node_take_a_config_file_and_the_environment(prefix, tmp_path, monkeypatch):
    """`--config FILE` and KVTIER_<SUBCOMMAND>_<FLAG> for master and node (as for the server):
    kvtier's and Mooncake's flag names as keys; the command line wins over the environment,
    which wins over the file; a bad key exits 2 naming it."""
    rpc, node_port = free_port(), free_port()
    master_cfg, node_cfg = tmp_path / "master.json", tmp_path / "node.json"
    master_cfg.write_text(json.dumps({"rpc_port": rpc, "http-port": 0,
                                      "default_kv_lease_ttl": 999, "log_level": "info"}))
    node_cfg.write_text(json.dumps({"master_server_address": f"127.0.0.1:{rpc}",
                                    "port": 1, "global_segment_size": "16MB",
                                    "host": "127.0.0.1", "no-prefault": True}))
    monkeypatch.setenv("KVTIER_MASTER_DEFAULT_KV_LEASE_TTL_MS", "250")
    monkeypatch.setenv("KVTIER_NODE_PORT", str(node_port))
    master = spawn_kvtier("master", ["master", "--config", str(master_cfg),
                                    "--log-level", "warn"])
    node = None
    try:
        master.wait_port(rpc, 20.0)
        node = spawn_kvtier("node", ["node", "--config", str(node_cfg)])
        node.wait_log(NODE_BANNER, 20.0)
        assert "lease 250 ms" in master.log_text()
        s = MooncakeDistributedStore()
        node.wait_ready(lambda: s.setup_dummy(0, 1 << 20, f"127.0.0.1:{node_port}") == 0, 20,
                        "setup_dummy")
        node.wait_ready(lambda: s.put(f"{prefix}-k", b"configured") == 0, 20, "a put")
        assert s.get(f"{prefix}-k") == b"configured"
        s.close()
    finally:
        for p in (node, master):
            if p is not None:
                p.stop()
                p.remove_log()
    bad_cfg = tmp_path / "bad.json"
    bad_cfg.write_text(json.dumps({"port": rpc, "evicton_ratio": 0.1}))
    bad = subprocess.run([find_binary(), "master", "--config", str(bad_cfg)],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "unknown key 'evicton_ratio'" in bad.stderr, bad.stderr


def check_mooncake_http_api(port, store, prefix, node):
    """Mooncake's master HTTP API (shapes as Mooncake's master answers them)."""
    def get(path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    keys = [f"{prefix}-http-{i}" for i in range(2)]
    for k in keys:
        assert store.put(k, k.encode() * 10) == 0
    assert get("/health") == (200, "OK")
    assert get("/get_all_segments") == (200, node + "\n")
    status, body = get("/get_all_keys")
    assert status == 200 and set(keys) <= set(body.splitlines())
    status, body = get(f"/query_key?key={keys[0]}")
    replicas = [json.loads(line) for line in body.splitlines()]
    assert status == 200 and len(replicas) == 1
    assert replicas[0]["size_"] == len(keys[0]) * 10
    assert replicas[0]["transport_endpoint_"] == node
    assert get(f"/query_key?key={prefix}-missing") == (404, "OBJECT_NOT_FOUND")
    status, body = get(f"/batch_query_keys?keys={keys[1]},{prefix}-missing")
    data = json.loads(body)["data"]
    assert status == 200 and data[keys[1]]["ok"] and len(data[keys[1]]["values"]) == 1
    assert data[f"{prefix}-missing"] == {"ok": False, "error": "OBJECT_NOT_FOUND"}
    assert get("/batch_query_keys")[0] == 400
    status, body = get(f"/query_segment?segment={node}")
    lines = body.splitlines()
    assert status == 200 and lines[0] == node and lines[1].startswith("Used(bytes): ")
    assert lines[2] == f"Capacity(bytes) : {16 << 20}"
    assert get("/query_segment?segment=nowhere:1") == (500, "Failed to query segment")
    detail = json.loads(get("/get_segments_detail")[1])
    assert detail["total_segments"] == 1 and detail["segments"][0]["te_endpoint"] == node
    assert get("/metrics/summary")[1].startswith("Storage: ")
    # Looking grants no lease: the keys can be removed at once.
    assert store.batch_remove(keys) == [0, 0]
