"""LMCache's own Mooncake store connector (``mooncakestore://``) and Mooncake lookup client, run
unchanged on kvtier's `mooncake` package against a real `kvtier master` + `kvtier node`.

LMCache builds them as it does in vLLM: its LMCacheEngineConfig (the Mooncake setup keys in
``extra_config``), its LocalCPUBackend (whose pinned buffer the connector registers), and its
CreateConnector factory. Both storage modes are covered: ``save_chunk_meta`` true (put_parts /
batch_get_buffer, LMCache's metadata stored with the bytes) and false (put_from /
batch_put_from / batch_get_into, zero-copy). Every byte LMCache reads back is compared with what
it stored, and the objects are also read straight from kvtier with a second client."""

import asyncio
import ast
import inspect

import pytest
import torch

import mooncake
from kvtier.store import DistributedStore
from store_cluster import running_cluster

from lmcache.utils import CacheEngineKey
from lmcache.v1.config import LMCacheEngineConfig
from lmcache.v1.lookup_client.mooncake_lookup_client import MooncakeLookupClient
from lmcache.v1.memory_management import MemoryFormat
from lmcache.v1.metadata import LMCacheMetadata
from lmcache.v1.storage_backend.connector import CreateConnector
from lmcache.v1.storage_backend.connector import mooncakestore_connector
from lmcache.v1.storage_backend.local_cpu_backend import LocalCPUBackend

CHUNK = 16
KV_SHAPE = (2, 2, CHUNK, 2, 8)  # layers, k/v, tokens, heads, head size


def test_the_mooncake_package_is_kvtiers():
    # run.py puts build/mooncake_compat on the path for LMCache: `import mooncake.store` in
    # LMCache must land on kvtier, not on a Mooncake wheel.
    assert getattr(mooncake, "IS_KVTIER", False), mooncake.__file__


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(lease_ms=300) as c:
        yield c


@pytest.fixture(scope="module")
def reader(cluster):
    """A second kvtier client, to read what LMCache stored without going through LMCache."""
    s = DistributedStore()
    assert s.setup_dummy(0, 8 << 20, cluster.node_address) == 0, cluster.logs()
    yield s
    s.close()


def _metadata():
    return LMCacheMetadata(model_name="kvtier-test", world_size=1, local_world_size=1,
                           worker_id=0, local_worker_id=0, kv_dtype=torch.bfloat16,
                           kv_shape=KV_SHAPE, chunk_size=CHUNK)


def _config(cluster, save_chunk_meta, prefer_local_alloc=False):
    # The keys of LMCache's documented Mooncake configuration, in extra_config.
    return LMCacheEngineConfig.from_defaults(
        chunk_size=CHUNK, local_cpu=False, max_local_cpu_size=0.0625,
        remote_url=f"mooncakestore://{cluster.master_address}/", remote_serde="naive",
        extra_config={
            "local_hostname": "127.0.0.1",
            "metadata_server": "P2PHANDSHAKE",
            "global_segment_size": str(16 << 20),
            "local_buffer_size": str(8 << 20),
            "protocol": "tcp",
            "device_name": "",
            "master_server_address": cluster.master_address,
            "save_chunk_meta": save_chunk_meta,
            "mooncake_prefer_local_alloc": prefer_local_alloc,
            "transfer_timeout": 10,
        })


class _Lmcache:
    """LMCache's CPU backend and its Mooncake connector, built by LMCache's own factory."""

    def __init__(self, cluster, save_chunk_meta, prefer_local_alloc=False):
        self.config = _config(cluster, save_chunk_meta, prefer_local_alloc)
        self.metadata = _metadata()
        self.backend = LocalCPUBackend(self.config, self.metadata)
        self.loop = asyncio.new_event_loop()
        self.connector = CreateConnector(self.config.remote_url, self.loop, self.backend,
                                         self.config, self.metadata)
        self.inner = self.connector
        while not isinstance(self.inner, mooncakestore_connector.MooncakestoreConnector):
            self.inner = self.inner._connector  # InstrumentedRemoteConnector wraps it

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def chunk(self, seed, tokens=CHUNK):
        obj = self.backend.allocate(self.metadata.get_shapes(tokens), self.metadata.get_dtypes(),
                                    MemoryFormat.KV_2LTD)
        assert obj is not None
        gen = torch.Generator().manual_seed(seed)
        obj.tensor.copy_(torch.randn(obj.tensor.shape, generator=gen).to(obj.tensor.dtype))
        return obj

    def key(self, prefix, i):
        return CacheEngineKey(self.metadata.model_name, 1, 0, hash((prefix, i)) & (2**63 - 1),
                              torch.bfloat16)

    def close(self):
        self.run(self.connector.close())
        self.loop.close()


@pytest.fixture(params=[True, False], ids=["save_chunk_meta", "zero_copy"])
def lm(request, cluster):
    lm = _Lmcache(cluster, request.param)
    yield lm
    lm.close()


def _bytes(obj):
    return bytes(obj.byte_array)


def test_store_lookup_load_delete(lm, reader, request):
    prefix = request.node.name
    keys = [lm.key(prefix, i) for i in range(4)]
    objs = [lm.chunk(i) for i in range(4)]
    # Copies taken now: LMCache frees a chunk once it is put, and its memory may then hold
    # what a later get loads.
    want = [_bytes(o) for o in objs]
    shapes = [tuple(o.tensor.shape) for o in objs]
    assert len(set(want)) == 4
    assert lm.inner.registered_buffer_ptr is not None  # LMCache registered its pinned buffer
    assert lm.run(lm.connector.batched_async_contains("l0", keys)) == 0

    lm.run(lm.connector.batched_put(keys[:3], objs[:3]))  # batch_put_from or put_parts each
    lm.run(lm.connector.put(keys[3], objs[3]))  # put_from or put_parts
    assert all(lm.run(lm.connector.exists(k)) for k in keys)
    assert all(lm.connector.exists_sync(k) for k in keys)
    assert lm.run(lm.connector.batched_async_contains("l1", keys)) == 4

    got = lm.run(lm.connector.batched_get(keys))  # batch_get_buffer or batch_get_into
    assert [_bytes(g) for g in got] == want
    assert [tuple(g.tensor.shape) for g in got] == shapes

    # What kvtier holds is what LMCache wrote: with save_chunk_meta, LMCache's header first.
    meta = lm.inner.remote_metadata_bytes if lm.inner.save_chunk_meta else 0
    for k, w in zip(keys, want):
        raw = reader.get(k.to_string())
        assert raw[meta:] == w and len(raw) == meta + len(w)

    # LMCache's Mooncake connector has no delete of its own (remove_sync is LMCache's
    # NotImplementedError); a delete through its store shows in its lookups and loads.
    with pytest.raises(NotImplementedError):
        lm.connector.remove_sync(keys[1])
    # force: the reads above hold a lease (OBJECT_HAS_LEASE otherwise, as in Mooncake).
    assert lm.inner.store.remove(keys[1].to_string(), force=True) == 0
    assert not lm.run(lm.connector.exists(keys[1]))
    assert lm.run(lm.connector.batched_async_contains("l2", keys)) == 1
    again = lm.run(lm.connector.batched_get(keys))
    assert again[1] is None
    assert [_bytes(again[i]) for i in (0, 2, 3)] == [want[i] for i in (0, 2, 3)]


def test_missing_keys_load_as_none(lm, request):
    keys = [lm.key(request.node.name, i) for i in range(2)]
    assert lm.run(lm.connector.batched_get(keys)) == [None, None]
    assert not lm.run(lm.connector.exists(keys[0]))


def test_partial_chunk_reads_back_with_its_token_count(cluster, request):
    # The last chunk of a prompt is shorter; zero-copy loads learn its length from the byte
    # count batch_get_into returns.
    lm = _Lmcache(cluster, save_chunk_meta=False)
    try:
        key = lm.key(request.node.name, 0)
        half = lm.chunk(7, tokens=CHUNK // 2)
        want = _bytes(half)
        lm.run(lm.connector.batched_put([key], [half]))
        got = lm.run(lm.connector.batched_get([key]))[0]
        assert got is not None and got.tensor.shape[2] == CHUNK // 2
        assert _bytes(got) == want
    finally:
        lm.close()


def test_prefer_local_alloc_names_this_node(cluster, request):
    lm = _Lmcache(cluster, save_chunk_meta=True, prefer_local_alloc=True)
    try:
        hostname = lm.inner.store.get_hostname()
        host, _, port = hostname.rpartition(":")
        assert host == "127.0.0.1" and int(port) > 0
        assert lm.inner.replica_config.preferred_segment == hostname
        key = lm.key(request.node.name, 0)
        obj = lm.chunk(3)
        want = _bytes(obj)
        lm.run(lm.connector.put(key, obj))
        assert _bytes(lm.run(lm.connector.batched_get([key]))[0]) == want
    finally:
        lm.close()


def test_mooncake_lookup_client_counts_stored_prefix(cluster):
    lm = _Lmcache(cluster, save_chunk_meta=True)
    try:
        client = MooncakeLookupClient(lm.config, lm.metadata, cluster.master_address)
        tokens = list(range(1000, 1000 + 3 * CHUNK))
        keys = [key for _, _, key in client.token_database.process_tokens(tokens)]
        assert len(keys) == 3 and client.lookup(tokens) == 0
        lm.run(lm.connector.batched_put(keys[:2], [lm.chunk(i) for i in range(2)]))
        assert client.lookup(tokens) == 2 * CHUNK  # batch_is_exist: the leading run of hits
        client.store.close()
    finally:
        lm.close()


# Each store call LMCache's Mooncake connector and lookup client make, and the test above that
# drives it. A call LMCache adds in a new release fails test_every_store_call_is_exercised.
EXERCISED = {
    "setup": "every test (setup(dict); the legacy positional form is LMCache's fallback)",
    "get_hostname": "test_prefer_local_alloc_names_this_node",
    "register_buffer": "test_store_lookup_load_delete",
    "unregister_buffer": "close() in every test",
    "is_exist": "test_store_lookup_load_delete",
    "batch_is_exist": "test_mooncake_lookup_client_counts_stored_prefix",
    "batch_get_into": "test_store_lookup_load_delete[zero_copy], partial chunk",
    "batch_get_buffer": "test_store_lookup_load_delete[save_chunk_meta]",
    "batch_put_from": "test_store_lookup_load_delete[zero_copy]",
    "put_from": "test_store_lookup_load_delete[zero_copy]",
    "put_parts": "test_store_lookup_load_delete[save_chunk_meta]",
    "close": "close() in every test",
}


def _store_calls(module):
    """Names called on a ``store`` attribute or variable in `module`'s source."""
    tree = ast.parse(inspect.getsource(module))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Attribute, ast.Name)):
            owner = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
            if owner == "store":
                names.add(node.attr)
    return names


def test_every_store_call_is_exercised():
    from lmcache.v1.lookup_client import mooncake_lookup_client
    calls = _store_calls(mooncakestore_connector) | _store_calls(mooncake_lookup_client)
    assert "batch_put_from" in calls and "put_parts" in calls  # the scan sees the calls
    assert sorted(calls - set(EXERCISED)) == []


def test_numa_binding_is_skipped_without_a_numa_mapping():
    # The connector binds to a NUMA node only when LMCache detects a GPU-to-NUMA mapping; it
    # imports mooncake.store.bind_to_numa_node then, and logs a warning when it is missing
    # (kvtier does not offer it: tests/engines/test_mooncake_api_surface.py).
    source = inspect.getsource(mooncakestore_connector.MooncakestoreConnector.__init__)
    assert "except ImportError" in source and "bind_to_numa_node" in source
    assert not hasattr(__import__("mooncake.store").store, "bind_to_numa_node")


def test_native_mooncake_l2_adapter_is_not_in_lmcaches_wheel():
    # LMCache's multiprocess L2 adapter "mooncake_store" drives Mooncake's C++ client
    # (RealClient) through LMCache's own extension lmcache.lmcache_mooncake, which the PyPI
    # wheel does not ship (it is built from source against Mooncake's headers). It cannot run
    # on kvtier's Python package either way; kvtier's server takes the L2 role itself
    # (docs/mooncake-migration.md).
    from lmcache.v1.distributed.l2_adapters import mooncake_store_l2_adapter as l2
    config = l2.MooncakeStoreL2AdapterConfig.from_dict({"type": "mooncake_store",
                                                        "protocol": "tcp"})
    with pytest.raises(RuntimeError, match="C\\+\\+ Mooncake extension") as info:
        l2._create_mooncake_store_l2_adapter(config)
    assert isinstance(info.value.__cause__, ImportError)
