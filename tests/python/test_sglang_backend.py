"""kvtier.integrations.sglang against a real master and node, driven the way SGLang's HiCache
controller drives a dynamic storage backend: constructed with (storage_config, {}), handed its host
pool with register_mem_pool_host, then batch_exists for a prefix hit, batch_get_v1 to load and
batch_set_v1 to back pages up. The host pools below lay out memory as SGLang's MHA and MLA host
pools do (layer_first and page_first) and answer get_page_buffer_meta with the same pointers."""

import dataclasses
import hashlib
import logging

import pytest

torch = pytest.importorskip("torch")

from kvtier.integrations.sglang import KvtierHiCacheStorage  # noqa: E402
from store_cluster import running_cluster  # noqa: E402

PAGE = 4      # tokens per page
LAYERS = 3


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(300) as c:
        yield c


@dataclasses.dataclass
class StorageConfig:  # SGLang's HiCacheStorageConfig fields the backend reads
    tp_rank: int = 0
    tp_size: int = 1
    is_mla_model: bool = False
    is_page_first_layout: bool = False
    model_name: str = "test-model"
    extra_config: dict = None


class HostPool:
    """A host KV pool with SGLang's buffer shapes and page pointers."""

    def __init__(self, layout, mla, pages=16, heads=2, head_dim=8, dim=12, seed=0):
        self.layout, self.mla, self.page_size = layout, mla, PAGE
        self.size = pages * PAGE
        if mla:
            shape = ((LAYERS, self.size, 1, dim) if layout == "layer_first"
                     else (self.size, LAYERS, 1, dim))
        else:
            shape = ((2, LAYERS, self.size, heads, head_dim) if layout == "layer_first"
                     else (2, self.size, LAYERS, heads, head_dim))
        gen = torch.Generator().manual_seed(seed)
        self.kv_buffer = torch.randint(-1000, 1000, shape, generator=gen).to(torch.bfloat16)
        self.token_elems = (dim if mla else heads * head_dim)  # per layer, per K or V

    def get_page_buffer_meta(self, indices):
        it = self.kv_buffer.element_size()
        base, per_tok = self.kv_buffer.data_ptr(), self.token_elems * it
        v_offset = 0 if self.mla else self.kv_buffer.numel() * it // 2
        ptrs, sizes = [], []
        for first in indices[::PAGE].tolist():
            if self.layout == "layer_first":
                for layer in range(LAYERS):
                    k = base + first * per_tok + layer * self.size * per_tok
                    ptrs += [k] if self.mla else [k, k + v_offset]
                    sizes += [PAGE * per_tok] * (1 if self.mla else 2)
            else:
                k = base + first * LAYERS * per_tok
                ptrs += [k] if self.mla else [k, k + v_offset]
                sizes += [LAYERS * PAGE * per_tok] * (1 if self.mla else 2)
        return ptrs, sizes

    def token_view(self, index):
        """Every byte of one token slot (all layers, K and V)."""
        if self.mla:
            return (self.kv_buffer[:, index] if self.layout == "layer_first"
                    else self.kv_buffer[index])
        return (self.kv_buffer[:, :, index] if self.layout == "layer_first"
                else self.kv_buffer[:, index])

    def get_data_page(self, index, flat=True):
        if self.mla:
            page = (self.kv_buffer[:, index:index + PAGE] if self.layout == "layer_first"
                    else self.kv_buffer[index:index + PAGE])
        else:
            page = (self.kv_buffer[:, :, index:index + PAGE] if self.layout == "layer_first"
                    else self.kv_buffer[:, index:index + PAGE])
        return page.flatten() if flat else page

    def get_dummy_flat_data_page(self):
        return torch.zeros_like(self.get_data_page(0))


def page_hashes(tokens):
    """SGLang's chained per-page keys: sha256 of the prior hash and the page's u32 tokens."""
    keys, prior = [], None
    for i in range(0, len(tokens) - len(tokens) % PAGE, PAGE):
        h = hashlib.sha256()
        if prior:
            h.update(bytes.fromhex(prior))
        for t in tokens[i:i + PAGE]:
            h.update(int(t).to_bytes(4, "little"))
        prior = h.hexdigest()
        keys.append(prior)
    return keys


def slots(pages):
    return torch.tensor([p * PAGE + t for p in pages for t in range(PAGE)], dtype=torch.int64)


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
