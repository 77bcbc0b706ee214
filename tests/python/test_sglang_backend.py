"""kvtier.integrations.sglang against a real master and node, driven the way SGLang's HiCache
controller drives a dynamic storage backend: constructed with (storage_config, {}), handed its host
pool with register_mem_pool_host, then batch_exists for a prefix hit, batch_get_v1 to load and
batch_set_v1 to back pages up. The host pools below lay out memory as SGLang's MHA and MLA host
pools do (layer_first and page_first) and answer get_page_buffer_meta with the same pointers."""

import logging

import pytest

torch = pytest.importorskip("torch")

from kvtier.integrations.sglang import KvtierHiCacheStorage  # noqa: E402
from sglang_harness import PAGE, HostPool, StorageConfig, page_hashes, slots  # noqa: E402
from store_cluster import running_cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(300) as c:
        yield c


@pytest.fixture(params=["dummy", "embedded"])
def make_backend(request, cluster):
    made = []

    def make(tp_rank=0, mla=False, prefix=None, **extra):
        if request.param == "dummy":
            extra.setdefault("node_address", cluster.node_address)
        else:
            extra.setdefault("master_server_address", cluster.master_address)
            extra.setdefault("global_segment_size", "16MB")
        extra.update(backend_name="kvtier", module_path="kvtier.integrations.sglang",
                     class_name="KvtierHiCacheStorage", interface_v1=1)
        if prefix is not None:
            extra["key_prefix"] = prefix
        backend = KvtierHiCacheStorage(StorageConfig(tp_rank=tp_rank, tp_size=2,
                                                     is_mla_model=mla, extra_config=extra), {})
        made.append(backend)
        return backend

    yield make
    for backend in made:
        backend.close()


@pytest.mark.parametrize("layout", ["layer_first", "page_first"])
def test_mha_pages_back_up_and_load_per_rank(make_backend, layout, request):
    prefix = f"{request.node.name}/"
    keys = page_hashes(list(range(1000, 1000 + 6 * PAGE)))
    writers = [make_backend(rank, prefix=prefix) for rank in (0, 1)]
    sources = [HostPool(layout, mla=False, seed=rank + 1) for rank in (0, 1)]
    for backend, pool in zip(writers, sources):
        backend.register_mem_pool_host(pool)
        assert backend.batch_exists(keys) == 0
        assert backend.batch_set_v1(keys[:4], slots([0, 1, 2, 3])) == [True] * 4
        assert backend.batch_set_v1(keys[:2], slots([0, 1])) == [True] * 2  # already there
    # Another process of the same rank (a restarted engine) finds the prefix and loads it into
    # other slots of its own pool.
    for rank in (0, 1):
        reader, pool = make_backend(rank, prefix=prefix), HostPool(layout, mla=False, seed=99)
        reader.register_mem_pool_host(pool)
        assert reader.batch_exists(keys) == 4
        assert reader.batch_exists(keys[4:]) == 0
        assert reader.batch_get_v1(keys[:4], slots([9, 10, 11, 12])) == [True] * 4
        for src_page, dst_page in zip([0, 1, 2, 3], [9, 10, 11, 12]):
            for t in range(PAGE):
                assert torch.equal(pool.token_view(dst_page * PAGE + t),
                                   sources[rank].token_view(src_page * PAGE + t))
        assert reader.batch_get_v1(keys[3:6], slots([13, 14, 15])) == [True, False, False]


def test_mla_pages_are_shared_by_every_rank(make_backend, request):
    prefix = f"{request.node.name}/"
    keys = page_hashes(list(range(50, 50 + 3 * PAGE)))
    writer, source = make_backend(0, mla=True, prefix=prefix), HostPool("page_first", mla=True)
    writer.register_mem_pool_host(source)
    assert writer.batch_set_v1(keys, slots([4, 5, 6])) == [True] * 3
    reader, pool = make_backend(1, mla=True, prefix=prefix), HostPool("page_first", mla=True,
                                                                       seed=7)
    reader.register_mem_pool_host(pool)
    assert reader.batch_exists(keys) == 3
    assert reader.batch_get_v1(keys, slots([0, 1, 2])) == [True] * 3
    for t in range(3 * PAGE):
        assert torch.equal(pool.token_view(t), source.token_view(4 * PAGE + t))


def test_generic_flat_page_interface(make_backend, request):
    backend = make_backend(prefix=f"{request.node.name}/")
    pool = HostPool("layer_first", mla=False, seed=3)
    backend.register_mem_pool_host(pool)
    keys = page_hashes(list(range(2 * PAGE)))
    assert backend.batch_set(keys, [pool.get_data_page(0), pool.get_data_page(PAGE)])
    got = backend.batch_get(keys + ["f" * 64], [pool.get_dummy_flat_data_page() for _ in range(3)])
    assert torch.equal(got[0], pool.get_data_page(0)) and torch.equal(got[1], pool.get_data_page(PAGE))
    assert got[2] is None
    assert backend.exists(keys[0]) and not backend.exists("f" * 64)
    backend.delete(keys[0])
    assert not backend.exists(keys[0]) and backend.exists(keys[1])


def test_clear_removes_this_prefix_only(make_backend, request):
    ours = make_backend(prefix=f"{request.node.name}/a/")
    other = make_backend(prefix=f"{request.node.name}/b/")
    keys = page_hashes(list(range(PAGE)))
    for backend in (ours, other):
        backend.register_mem_pool_host(HostPool("page_first", mla=False))
        assert backend.batch_set_v1(keys, slots([0])) == [True]
    ours.clear()
    assert ours.batch_exists(keys) == 0
    assert other.batch_exists(keys) == 1


def test_configuration_errors(cluster, caplog):
    def config(**extra):
        return StorageConfig(extra_config=extra)
    with pytest.raises(ValueError, match="node_address"):
        KvtierHiCacheStorage(config(), {})
    with pytest.raises(ValueError, match="'node_address' must be a string"):
        KvtierHiCacheStorage(config(node_address=["x"]), {})
    with pytest.raises(RuntimeError, match="cannot reach the store"):
        KvtierHiCacheStorage(config(node_address="127.0.0.1:1"), {})
    with caplog.at_level(logging.WARNING, logger="kvtier.integrations.sglang"):
        backend = KvtierHiCacheStorage(config(node_address=cluster.node_address, bogus=1), {})
    assert "bogus" in caplog.text
    assert backend.key_prefix == "test-model/"
    backend.close()
