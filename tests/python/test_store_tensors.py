"""Mooncake's tensor calls on kvtier.store (store_tensors.py) against a real master and node, in
both client modes: dtypes and shapes round-trip bit for bit, TP shards, zero-copy reads."""

import ctypes

import pytest

from kvtier.store import ErrorCode, MooncakeHostMemAllocator
from store_cluster import running_cluster

torch = pytest.importorskip("torch")  # Debian's python3-torch (scripts/install-deps.sh)


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(500) as c:
        yield c


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.view(-1).view(torch.uint8),
                                                                     b.view(-1).view(torch.uint8))


def test_tensors_round_trip_every_dtype_and_shape(store, prefix):
    g = torch.Generator().manual_seed(1)
    tensors = [
        torch.randn(3, 5, generator=g),
        torch.randn(2, 3, 4, 5, 6, generator=g).to(torch.bfloat16),  # 5 dims, 2-byte float
        torch.randint(-1000, 1000, (17,), generator=g, dtype=torch.int64),
        torch.randn(4, 4, generator=g).half().t(),  # not contiguous
        torch.tensor(True),
        torch.empty(0, 3),
    ]
    keys = [f"{prefix}-{i}" for i in range(len(tensors))]
    assert store.batch_put_tensor(keys, tensors) == [0] * len(tensors)
    got = store.batch_get_tensor(keys + [f"{prefix}-missing"])
    assert got[-1] is None
    for want, have in zip(tensors, got):
        assert same(want.contiguous(), have), (want, have)
    assert store.put_tensor(f"{prefix}-x", tensors[0]) == 0
    assert same(store.get_tensor(f"{prefix}-x"), tensors[0])
    # Not a stored tensor: None, not an exception.
    assert store.put(f"{prefix}-bytes", b"plain bytes") == 0
    assert store.get_tensor(f"{prefix}-bytes") is None
    with pytest.raises(TypeError):
        store.put_tensor(f"{prefix}-bad", [1, 2, 3])


def test_tensor_parallel_shards(store, prefix):
    w = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    assert store.put_tensor_with_tp(f"{prefix}-w", w, tp_size=4, split_dim=0) == 0
    for rank in range(4):
        shard = store.get_tensor_with_tp(f"{prefix}-w", tp_rank=rank, tp_size=4)
        assert same(shard, w[2 * rank:2 * rank + 2].contiguous())
    assert store.is_exist(f"{prefix}-w_tp_3") == 1 and store.is_exist(f"{prefix}-w") == 0
    assert store.batch_put_tensor_with_tp([f"{prefix}-c"], [w], tp_size=2, split_dim=1) == [0]
    cols = store.batch_get_tensor_with_tp([f"{prefix}-c"], tp_rank=1, tp_size=2)
    assert same(cols[0], w[:, 3:].contiguous())
    assert store.put_tensor_with_tp(f"{prefix}-small", torch.ones(2), tp_size=4) == -600


def test_get_tensor_into_views_registered_memory(store, prefix):
    allocator = MooncakeHostMemAllocator()
    size = 1 << 20
    ptr = allocator.alloc(size)
    try:
        assert store.register_buffer(ptr, size) == 0
        t = torch.randn(64, 64)
        assert store.put_tensor(f"{prefix}-t", t) == 0
        view = store.get_tensor_into(f"{prefix}-t", ptr, size)
        assert same(view, t)
        # The tensor views the buffer (no copy): its data lies inside it, a write shows there.
        assert ptr <= view.data_ptr() < ptr + size
        view[0, 0] = 12345.0
        assert ctypes.c_float.from_address(view.data_ptr()).value == 12345.0
        assert store.get_tensor_into(f"{prefix}-missing", ptr, size) is None
        assert store.get_tensor_into(f"{prefix}-t", ptr, 100) is None  # BUFFER_OVERFLOW
        got = store.batch_get_tensor_into([f"{prefix}-t"], [ptr], [size])
        assert same(got[0], t)
    finally:
        store.unregister_buffer(ptr)
        allocator.free(ptr)


def test_upsert_and_pub_tensor(store, prefix):
    k = f"{prefix}-k"
    assert store.pub_tensor(k, torch.zeros(3)) == 0
    assert store.upsert_tensor(k, torch.ones(4)) == 0
    assert same(store.get_tensor(k), torch.ones(4))
    assert store.upsert_tensor(k, torch.ones(5)) == ErrorCode.OBJECT_HAS_LEASE  # just read
