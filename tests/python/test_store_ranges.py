"""Mooncake's ranged and session calls (kvtier/store_ranges.py), the per-segment replica clear
and the task calls, against a real master and node, through a dummy and an embedded client."""

import threading

import numpy as np
import pytest

from kvtier.store import ErrorCode, MooncakeDistributedStore
from store_cluster import running_cluster

INVALID = int(ErrorCode.INVALID_PARAMS)
NOT_FOUND = int(ErrorCode.OBJECT_NOT_FOUND)


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(300) as c:
        yield c


def random_bytes(n, seed):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_get_into_ranges_reads_fragments_of_many_keys(store, prefix):
    a, b = random_bytes(1000, 1), random_bytes(300, 2)
    ka, kb = f"{prefix}-a", f"{prefix}-b"
    assert store.put(ka, a) == 0 and store.put(kb, b) == 0
    out0, out1 = np.zeros(64, dtype=np.uint8), np.zeros(32, dtype=np.uint8)
    results = store.get_into_ranges(
        [out0.ctypes.data, out1.ctypes.data],
        [[ka, kb], [kb, f"{prefix}-missing"]],
        [[[0, 10], [20]], [[0], [8]]],      # destination offsets
        [[[100, 990], [5]], [[295], [0]]],  # source offsets
        [[[10, 10], [7]], [[5], [4]]])      # sizes
    assert results == [[[10, 10], [7]], [[5], [NOT_FOUND]]]
    assert out0[0:10].tobytes() == a[100:110].tobytes()
    assert out0[10:20].tobytes() == a[990:1000].tobytes()
    assert out0[20:27].tobytes() == b[5:12].tobytes()
    assert out1[0:5].tobytes() == b[295:300].tobytes()
    assert not out1[8:12].any()  # the missing key wrote nothing
    # A range past the object's end, per fragment; lists that do not match.
    assert store.get_into_ranges([out0.ctypes.data], [[ka]], [[[0, 0]]], [[[995, 0]]],
                                 [[[10, 5]]]) == [[[INVALID, 5]]]
    assert store.get_into_ranges([out0.ctypes.data], [[ka]], [[[0]]], [[[0, 1]]],
                                 [[[1]]]) == [[[INVALID]]]
    # Top-level lists of different lengths: one [[INVALID]] per buffer, as Mooncake answers.
    assert store.get_into_ranges([1, 2], [[ka]], [[[0]]], [[[0]]], [[[1]]]) == [
        [[INVALID]], [[INVALID]]]


def test_put_session_assembles_an_object_from_layer_ranges(store, prefix):
    layers, page = 4, 512
    keys = [f"{prefix}-{i}" for i in range(3)]
    data = {k: [random_bytes(page, 10 * i + layer) for layer in range(layers)]
            for i, k in enumerate(keys)}
    assert store.batch_put_session_start(keys, [page * layers] * 3) == [0, 0, 0]
    assert store.batch_put_session_start(keys[:1], [page]) == [INVALID]  # open: as Mooncake
    assert store.is_exist(keys[0]) == 0  # nothing is visible before the end
    for layer in reversed(range(layers)):  # one call per layer, in any order
        got = store.batch_put_from_multi_buffer_ranges(
            keys, [[data[k][layer].ctypes.data] for k in keys], [[page]] * 3,
            [[layer * page]] * 3)
        assert got == [page] * 3
    # A range past the end of the object, and a key without a session.
    assert store.batch_put_from_multi_buffer_ranges(
        [keys[0], f"{prefix}-none"], [[data[keys[0]][0].ctypes.data]] * 2, [[page]] * 2,
        [[layers * page - 1], [0]]) == [INVALID, INVALID]
    assert store.batch_put_session_end(keys[:2]) == [0, 0]
    assert store.batch_put_session_revoke([keys[2], keys[0]]) == [0, INVALID]
    for k in keys[:2]:
        assert store.get(k) == b"".join(layer.tobytes() for layer in data[k])
    assert store.is_exist(keys[2]) == 0  # revoked
    assert store.batch_put_session_start([keys[0], f"{prefix}-zero"], [1, 0]) == [
        int(ErrorCode.OBJECT_ALREADY_EXISTS), INVALID]


def test_get_session_reads_layers_of_a_snapshot(store, prefix):
    layers, page = 3, 256
    k = f"{prefix}-k"
    value = random_bytes(layers * page, 7)
    assert store.put(k, value) == 0
    assert store.batch_get_session_start([k, f"{prefix}-missing"]) == [0, NOT_FOUND]
    assert store.remove(k, force=True) == 0  # the session holds what it read
    outs = [np.zeros(page, dtype=np.uint8) for _ in range(layers)]
    for layer in range(layers):
        assert store.batch_get_into_multi_buffer_ranges(
            [k], [[outs[layer].ctypes.data]], [[page]], [[layer * page]]) == [page]
    assert b"".join(o.tobytes() for o in outs) == value.tobytes()
    assert store.batch_get_into_multi_buffer_ranges(
        [k, f"{prefix}-missing"], [[outs[0].ctypes.data]] * 2, [[page]] * 2,
        [[layers * page - 1], [0]]) == [INVALID, INVALID]
    assert store.batch_get_session_end([k]) == 0
    assert store.batch_get_into_multi_buffer_ranges(
        [k], [[outs[0].ctypes.data]], [[1]], [[0]]) == [INVALID]


def test_sessions_from_many_threads(store, prefix):
    errors = []

    def worker(t):
        key = f"{prefix}-t{t}"
        part = random_bytes(4096, t)
        try:
            assert store.batch_put_session_start([key], [8192]) == [0]
            for off in (0, 4096):
                assert store.batch_put_from_multi_buffer_ranges(
                    [key], [[part.ctypes.data]], [[4096]], [[off]]) == [4096]
            assert store.batch_put_session_end([key]) == [0]
            assert store.get(key) == part.tobytes() * 2
        except AssertionError as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_put_from_with_metadata_stores_metadata_then_data(store, prefix):
    meta, data = random_bytes(40, 3), random_bytes(5000, 4)
    k = f"{prefix}-k"
    assert store.put_from_with_metadata(k, data.ctypes.data, meta.ctypes.data, data.nbytes,
                                        meta.nbytes) == 0
    assert store.get(k) == meta.tobytes() + data.tobytes()


def test_replica_clear_and_tasks(store, prefix):
    keys = [f"{prefix}-{i}" for i in range(3)]
    for k in keys:
        assert store.put(k, b"v") == 0
    assert store.get(keys[1]) == b"v"  # leased: skipped
    assert store.batch_replica_clear(keys + [f"{prefix}-missing"]) == [keys[0], keys[2]]
    assert store.batch_is_exist(keys) == [0, 1, 0]
    assert store.batch_replica_clear([keys[1]], segment_name="127.0.0.1:1") == []
    assert store.is_exist(keys[1]) == 1
    unavailable = int(ErrorCode.UNAVAILABLE_IN_CURRENT_MODE)
    assert store.create_copy_task(keys[1], ["seg"]) == ((0, 0), unavailable)
    assert store.create_move_task(keys[1], "a", "b") == ((0, 0), unavailable)
    assert store.query_task((1, 2)) == (None, unavailable)


def test_session_calls_before_setup():
    s = MooncakeDistributedStore()
    assert s.batch_get_session_start(["k"]) == []
    assert s.batch_put_session_start(["k"], [1]) == []
    assert s.batch_put_from_multi_buffer_ranges(["k"], [[1]], [[1]], [[0]]) == []
    assert s.batch_get_into_multi_buffer_ranges(["k"], [[1]], [[1]], [[0]]) == []
    assert s.batch_put_session_end(["k"]) == []
    assert s.batch_get_session_end(["k"]) == -1
