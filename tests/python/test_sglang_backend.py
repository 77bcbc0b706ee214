"""kvtier.integrations.sglang against a real master and node, driven the way SGLang's HiCache
controller drives a dynamic storage backend: constructed with (storage_config, {}), handed its host
pool with register_mem_pool_host, then batch_exists for a prefix hit, batch_get_v1 to load and
batch_set_v1 to back pages up (or batch_get / batch_set of flat pages without interface_v1). The
host pools of sglang_harness lay out memory as SGLang's MHA and MLA host pools do and answer
get_page_buffer_meta with the same pointers. SGLang is not installed here: tests/engines/
test_sglang_*.py run the backend under SGLang's own factory, pools and controller."""

import logging

import pytest

torch = pytest.importorskip("torch")

from kvtier.integrations.sglang import KvtierHiCacheStorage  # noqa: E402
from sglang_harness import (PAGE, HostPool, PoolTransfer, StorageConfig, page_hashes,  # noqa: E402
                            slots)
from store_cluster import running_cluster  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(300) as c:
        yield c


@pytest.fixture(params=["dummy", "embedded"])
def make_backend(request, cluster):
    made = []

    def make(tp_rank=0, mla=False, prefix=None, config=None, **extra):
        if request.param == "dummy":
            extra.setdefault("node_address", cluster.node_address)
        else:
            extra.setdefault("master_server_address", cluster.master_address)
            extra.setdefault("global_segment_size", "16MB")
        extra.setdefault("interface_v1", 1)
        extra.update(backend_name="kvtier", module_path="kvtier.integrations.sglang",
                     class_name="KvtierHiCacheStorage")
        if prefix is not None:
            extra["key_prefix"] = prefix
        fields = dict(tp_rank=tp_rank, tp_size=2, is_mla_model=mla)
        fields.update(config or {})
        backend = KvtierHiCacheStorage(StorageConfig(extra_config=extra, **fields), {})
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


def test_flat_pages_hit_and_load_through_either_interface(make_backend, request):
    # Without interface_v1 SGLang asks batch_exists, then batch_get of flat pages: an MHA page
    # stored by batch_set must hit, and the zero-copy calls must find the same objects.
    prefix = f"{request.node.name}/"
    flat = make_backend(prefix=prefix, interface_v1=0)
    source = HostPool("layer_first", mla=False, seed=5)
    flat.register_mem_pool_host(source)
    keys = page_hashes(list(range(7, 7 + 3 * PAGE)))
    assert flat.batch_set(keys[:2], [source.get_data_page(0), source.get_data_page(PAGE)])
    assert flat.batch_exists(keys) == 2
    zero_copy, pool = make_backend(prefix=prefix), HostPool("layer_first", mla=False, seed=6)
    zero_copy.register_mem_pool_host(pool)
    assert zero_copy.batch_exists(keys) == 2
    assert zero_copy.batch_get_v1(keys[:2], slots([4, 5])) == [True, True]
    for t in range(2 * PAGE):
        assert torch.equal(pool.token_view(4 * PAGE + t), source.token_view(t))
    assert zero_copy.batch_set_v1(keys[2:], slots([7])) == [True]
    got = flat.batch_get(keys, [source.get_dummy_flat_data_page() for _ in keys])
    assert torch.equal(got[2], pool.get_data_page(7 * PAGE))
    assert torch.equal(got[0], source.get_data_page(0))


@pytest.mark.parametrize("mla", [False, True])
def test_other_stages_ranks_and_sizes_do_not_read_these_pages(make_backend, mla, request):
    prefix = f"{request.node.name}/"
    keys = page_hashes(list(range(300, 300 + 2 * PAGE)))
    here = dict(tp_size=2, pp_rank=0, pp_size=2)
    writer = make_backend(0, mla=mla, prefix=prefix, config=here)
    writer.register_mem_pool_host(HostPool("page_first", mla=mla, seed=1))
    assert writer.batch_set_v1(keys, slots([0, 1])) == [True, True]
    others = [dict(here, pp_rank=1), dict(here, pp_size=1),
              dict(here, attn_cp_rank=1, attn_cp_size=2)]
    if not mla:  # MHA heads are split over TP ranks; MLA pages are every rank's
        others += [dict(here, tp_rank=1), dict(here, tp_size=4)]
    for config in others:
        reader = make_backend(0, mla=mla, prefix=prefix, config=config)
        reader.register_mem_pool_host(HostPool("page_first", mla=mla))
        assert reader.batch_exists(keys) == 0, config
        assert reader.batch_get_v1(keys, slots([2, 3])) == [False, False], config
    same = make_backend(1 if mla else 0, mla=mla, prefix=prefix, config=here)
    same.register_mem_pool_host(HostPool("page_first", mla=mla))
    assert same.batch_exists(keys) == 2


def test_pages_of_another_layout_miss(make_backend, request):
    prefix = f"{request.node.name}/"
    keys = page_hashes(list(range(40, 40 + PAGE)))
    writer = make_backend(prefix=prefix)
    writer.register_mem_pool_host(HostPool("page_first", mla=False))
    assert writer.batch_set_v1(keys, slots([0])) == [True]
    reader = make_backend(prefix=prefix)
    reader.register_mem_pool_host(HostPool("layer_first", mla=False))
    assert reader.batch_exists(keys) == 0


def test_k_and_v_of_different_widths_in_two_buffers(make_backend, request):
    prefix = f"{request.node.name}/"
    keys = page_hashes(list(range(90, 90 + 2 * PAGE)))
    writer, source = make_backend(prefix=prefix), HostPool("page_first", mla=False, seed=2,
                                                          v_head_dim=4)
    writer.register_mem_pool_host(source)
    assert writer.batch_set_v1(keys, slots([3, 4])) == [True, True]
    reader, pool = make_backend(prefix=prefix), HostPool("page_first", mla=False, seed=3,
                                                         v_head_dim=4)
    reader.register_mem_pool_host(pool)
    assert reader.batch_get_v1(keys, slots([0, 1])) == [True, True]
    for t in range(2 * PAGE):
        assert torch.equal(pool.token_view(t), source.token_view(3 * PAGE + t))


def test_extra_pools_of_hybrid_models(make_backend, request):
    prefix = f"{request.node.name}/"
    keys = page_hashes(list(range(500, 500 + 3 * PAGE)))
    writer, kv = make_backend(prefix=prefix), HostPool("page_first", mla=False, seed=1)
    state = HostPool("page_first", mla=True, seed=8, page=1, pages=8, layers=2, dim=6)
    writer.register_mem_pool_host(kv)
    writer.register_mem_host_pool_v2(state, "mamba")
    assert writer.batch_set_v1(keys, slots([0, 1, 2])) == [True] * 3
    # The state of the last two pages only, as SGLang keeps Mamba state for a prefix's tail.
    put = PoolTransfer("mamba", torch.tensor([5, 6]), keys[1:], "trailing_pages")
    assert writer.batch_set_v2([put]) == {"mamba": [True, True]}
    reader, pool = make_backend(prefix=prefix), HostPool("page_first", mla=True, seed=9, page=1,
                                                         pages=8, layers=2, dim=6)
    reader.register_mem_pool_host(HostPool("page_first", mla=False))
    reader.register_mem_host_pool_v2(pool, "mamba")
    tail = reader.batch_exists_v2(keys, [PoolTransfer("mamba", keys=keys[2:],
                                                      hit_policy="trailing_pages")])
    assert tail.kv_hit_pages == 3 and tail.restorable_prefix_pages == [2, 3]
    every = reader.batch_exists_v2(keys, [PoolTransfer("mamba", keys=keys)])
    assert every.kv_hit_pages == 0 and every.restorable_prefix_pages == []
    got = reader.batch_get_v2([PoolTransfer("mamba", torch.tensor([0, 1, 2]), keys)])
    assert got == {"mamba": [False, True, True]}
    assert torch.equal(pool.token_view(1), state.token_view(5))
    assert torch.equal(pool.token_view(2), state.token_view(6))
    with pytest.raises(ValueError, match="block_groups"):
        reader.batch_exists_v2(keys, [PoolTransfer("mamba", keys=keys, hit_policy="block_groups")])


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
    address = cluster.node_address
    with pytest.raises(ValueError, match="tp_lcm_size"):
        KvtierHiCacheStorage(StorageConfig(should_split_heads=True,
                                           extra_config={"node_address": address}), {})
    with pytest.raises(ValueError, match="pp_rank 2 is outside pp_size 2"):
        KvtierHiCacheStorage(StorageConfig(pp_rank=2, pp_size=2,
                                           extra_config={"node_address": address}), {})
    with pytest.raises(RuntimeError, match="register_mem_pool_host first"):
        backend = KvtierHiCacheStorage(config(node_address=address), {})
        try:
            backend.batch_exists(["00"])
        finally:
            backend.close()
    with caplog.at_level(logging.WARNING, logger="kvtier.integrations.sglang"):
        backend = KvtierHiCacheStorage(config(node_address=cluster.node_address, bogus=1), {})
    assert "bogus" in caplog.text
    assert backend.key_prefix == "test-model/"
    backend.close()
