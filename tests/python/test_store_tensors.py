"""Mooncake's tensor calls on kvtier.store (store_tensors.py) against a real master and node, in
both client modes: Mooncake's byte layout field by field, dtypes and shapes round-trip bit for
bit, TP shards, registered memory in and out, safetensors files."""

import ctypes
import json
import struct

import pytest

from kvtier import safetensors_file
from kvtier.store import ErrorCode, MooncakeHostMemAllocator, ReplicateConfig
from kvtier.store_tensors import deserialize_tensor, serialize_tensor, tensor_metadata_size
from store_cluster import running_cluster

torch = pytest.importorskip("torch")  # Debian's python3-torch (scripts/install-deps.sh)

INVALID = int(ErrorCode.INVALID_PARAMS)
# Mooncake's TensorDtype codes; torch names (older torch lacks uint16/32/64 and float8).
DTYPE_CODES = {"float32": 0, "float64": 1, "int8": 2, "uint8": 3, "int16": 4, "uint16": 5,
               "int32": 6, "uint32": 7, "int64": 8, "uint64": 9, "bool": 10, "float16": 11,
               "bfloat16": 12, "float8_e4m3fn": 13, "float8_e5m2": 14}


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(500) as c:
        yield c


@pytest.fixture
def registered(store):
    """(ptr, size): 1 MiB of MooncakeHostMemAllocator memory registered with the store (the
    memory a dummy client may hand to the node)."""
    allocator = MooncakeHostMemAllocator()
    size = 1 << 20
    ptr = allocator.alloc(size)
    assert ptr and store.register_buffer(ptr, size) == 0
    yield ptr, size
    store.unregister_buffer(ptr)
    allocator.free(ptr)


def same(a, b):
    """Same dtype, shape and bytes (NaN patterns included)."""
    return (a.dtype == b.dtype and a.shape == b.shape
            and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8)))


def raw_bytes(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def header(raw):
    """Mooncake's TensorMetadata read at its documented offsets."""
    fields = struct.unpack_from("<IHHiiIIQQ", raw, 0)
    names = ("magic", "version", "header_size", "dtype", "ndim", "layout_kind",
             "reserved_flags", "data_offset", "data_bytes")
    h = dict(zip(names, fields))
    h["global_shape"] = struct.unpack_from("<8q", raw, 40)
    h["local_shape"] = struct.unpack_from("<8q", raw, 104)
    h["axis_count"], h["reserved0"] = struct.unpack_from("<II", raw, 168)
    h["axes"] = [struct.unpack_from("<6iq", raw, 176 + 32 * i) for i in range(4)]
    return h


def write_at(ptr, data):
    ctypes.memmove(ptr, bytes(data), len(data))


def random_tensor(dtype, shape, seed=1):
    """Random bytes viewed as `dtype` (0/1 for bool): every bit pattern must survive."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g, dtype=torch.uint8).bool()
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, (*shape[:-1], shape[-1] * size), generator=g, dtype=torch.uint8)
    return raw.view(dtype)


# ---- the byte layout ----

def test_header_is_mooncakes_layout_field_by_field(store, prefix):
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert store.put_tensor(f"{prefix}-t", t) == 0
    raw = store.get(f"{prefix}-t")
    assert raw == serialize_tensor(t) and len(raw) == 304 + 24 and tensor_metadata_size() == 304
    assert raw[:4] == b"NOOM"
    h = header(raw)
    assert (h["magic"], h["version"], h["header_size"]) == (0x4D4F4F4E, 1, 304)
    assert (h["dtype"], h["ndim"], h["layout_kind"], h["reserved_flags"]) == (0, 2, 0, 0)
    assert (h["data_offset"], h["data_bytes"]) == (304, 24)
    assert h["global_shape"] == h["local_shape"] == (2, 3, -1, -1, -1, -1, -1, -1)
    assert (h["axis_count"], h["reserved0"]) == (0, 0)
    assert h["axes"] == [(0,) * 7] * 4
    assert raw[304:] == struct.pack("<6f", 0, 1, 2, 3, 4, 5)


@pytest.mark.parametrize("name", DTYPE_CODES)
def test_every_mooncake_dtype_code_round_trips(store, prefix, name):
    if not hasattr(torch, name):
        pytest.skip(f"this torch ({torch.__version__}) has no torch.{name}")
    t = random_tensor(getattr(torch, name), (3, 5))
    raw = serialize_tensor(t)
    assert header(raw)["dtype"] == DTYPE_CODES[name] and raw[304:] == raw_bytes(t)
    assert store.put_tensor(f"{prefix}-t", t) == 0
    assert same(store.get_tensor(f"{prefix}-t"), t)


def test_tensors_round_trip_every_shape(store, prefix):
    g = torch.Generator().manual_seed(1)
    tensors = [
        torch.randn(3, 5, generator=g),
        torch.randn(2, 3, 4, 5, 6, generator=g).to(torch.bfloat16),  # 5 dims, 2-byte float
        torch.randn(1, 2, 1, 2, 1, 2, 1, 2, generator=g),  # 8 dims: the most the layout holds
        torch.randint(-1000, 1000, (17,), generator=g, dtype=torch.int64),
        torch.randn(4, 4, generator=g).half().t(),  # not contiguous
        torch.tensor(True),  # 0 dims
        torch.empty(0, 3),  # zero-size
    ]
    keys = [f"{prefix}-{i}" for i in range(len(tensors))]
    assert store.batch_put_tensor(keys, tensors) == [0] * len(tensors)
    got = store.batch_get_tensor(keys + [f"{prefix}-missing"])
    assert got[-1] is None
    for want, have in zip(tensors, got):
        assert same(want.contiguous(), have), (want, have)
    assert header(store.get(keys[5]))["global_shape"] == (-1,) * 8  # 0 dims
    h = header(store.get(keys[6]))
    assert h["global_shape"][:3] == (0, 3, -1) and h["data_bytes"] == 0
    # The layout cannot hold these: INVALID_PARAMS; a non-tensor raises.
    assert store.put_tensor(f"{prefix}-9d", torch.zeros([1] * 9)) == INVALID
    assert store.put_tensor(f"{prefix}-complex", torch.zeros(2, dtype=torch.complex64)) == INVALID
    with pytest.raises(TypeError):
        store.put_tensor(f"{prefix}-bad", [1, 2, 3])


def corruptions(valid):
    """(what, bytes) pairs Mooncake's ValidateTensorMetadata refuses."""
    def patched(fmt, offset, *values):
        b = bytearray(valid)
        struct.pack_into(fmt, b, offset, *values)
        return bytes(b)
    return [
        ("magic", patched("<I", 0, 0x4D4F4F4F)),
        ("version", patched("<H", 4, 2)),
        ("header_size", patched("<H", 6, 40)),
        ("dtype 15", patched("<i", 8, 15)),
        ("dtype -1", patched("<i", 8, -1)),
        ("ndim 9", patched("<i", 12, 9)),
        ("layout_kind 2", patched("<I", 16, 2)),
        ("data_offset", patched("<Q", 24, 303)),
        ("data_bytes", patched("<Q", 32, 20)),
        ("negative dim", patched("<q", 40, -2)),
        ("unused dim not -1", patched("<q", 104 + 8 * 2, 0)),
        ("shape and bytes disagree", patched("<q", 104, 3)),
        ("axis_count 5", patched("<I", 168, 5)),
        ("axis rank >= count", patched("<Ii6iq", 168, 1, 0, 1, 0, 2, 2, 0, 0, 1)),
        ("truncated payload", valid[:-1]),
        ("no header", valid[:100]),
        ("legacy 40-byte header", struct.pack("<ii4q", 0, 2, 2, 3, -1, -1) + valid[304:]),
    ]


def test_invalid_headers_read_as_none(store, prefix):
    valid = serialize_tensor(torch.arange(6, dtype=torch.float32).reshape(2, 3))
    assert same(deserialize_tensor(valid), torch.arange(6.0).reshape(2, 3))
    for what, data in corruptions(valid):
        assert deserialize_tensor(data) is None, what
    what, data = corruptions(valid)[0]
    assert store.put(f"{prefix}-bad", data) == 0
    assert store.get_tensor(f"{prefix}-bad") is None
    assert store.put(f"{prefix}-bytes", b"plain bytes") == 0
    assert store.get_tensor(f"{prefix}-bytes") is None


def test_deserialize_views_writable_memory_and_copies_bytes():
    t = torch.arange(4, dtype=torch.int32)
    data = bytearray(serialize_tensor(t))
    view = deserialize_tensor(data)
    view[0] = 99  # a view: the write lands in `data`
    assert struct.unpack_from("<i", data, 304)[0] == 99
    copy = deserialize_tensor(bytes(data))
    copy[1] = -1
    assert same(copy, torch.tensor([99, -1, 2, 3], dtype=torch.int32))


# ---- tensor parallelism ----

def test_tensor_parallel_shards(store, prefix):
    w = torch.arange(48, dtype=torch.float32).reshape(8, 6)
    assert store.put_tensor_with_tp(f"{prefix}-w", w, tp_size=4, split_dim=0) == 0
    for rank in range(4):
        shard = store.get_tensor_with_tp(f"{prefix}-w", tp_rank=rank, tp_size=4)
        assert same(shard, w[2 * rank:2 * rank + 2].contiguous())
    assert store.is_exist(f"{prefix}-w_tp_3") == 1 and store.is_exist(f"{prefix}-w") == 0
    h = header(store.get(f"{prefix}-w_tp_3"))
    assert (h["layout_kind"], h["axis_count"]) == (1, 1)
    assert h["global_shape"][:3] == (8, 6, -1) and h["local_shape"][:3] == (2, 6, -1)
    # kind TP, axis_index 0, shard_rank, shard_count, split_dim, reserved0, local extent
    assert h["axes"][0] == (1, 0, 3, 4, 0, 0, 2) and h["axes"][1] == (0,) * 7
    assert store.batch_put_tensor_with_tp([f"{prefix}-c"], [w], tp_size=2, split_dim=1) == [0]
    cols = store.batch_get_tensor_with_tp([f"{prefix}-c"], tp_rank=1, tp_size=2)
    assert same(cols[0], w[:, 3:].contiguous())
    # tp_rank is ignored on write: every shard is stored.
    assert store.put_tensor_with_tp(f"{prefix}-r", w, tp_rank=1, tp_size=2) == 0
    assert store.batch_is_exist([f"{prefix}-r_tp_0", f"{prefix}-r_tp_1"]) == [1, 1]
    assert store.put_tensor_with_tp(f"{prefix}-one", w, tp_size=1) == 0  # the key itself
    assert same(store.get_tensor_with_tp(f"{prefix}-one"), w)
    assert store.put_tensor_with_tp(f"{prefix}-x", w, tp_size=0) == INVALID
    assert store.put_tensor_with_tp(f"{prefix}-x", w, tp_size=2, split_dim=2) == INVALID


def test_tensor_parallel_uneven_and_empty_shards(store, prefix):
    # chunk = ceil(7 / 3) = 3: shards of 3, 3 and 1 rows.
    rows = torch.arange(14, dtype=torch.int64).reshape(7, 2)
    assert store.put_tensor_with_tp(f"{prefix}-u", rows, tp_size=3) == 0
    got = store.batch_get_tensor_with_tp([f"{prefix}-u"], tp_rank=2, tp_size=3)
    assert same(got[0], rows[6:])
    # tp_size > dim: chunk 1, ranks 2 and 3 hold empty shards (not an error).
    v = torch.tensor([5.0, 6.0])
    assert store.pub_tensor_with_tp(f"{prefix}-s", v, ReplicateConfig(), tp_size=4) == 0
    shards = [store.get_tensor_with_tp(f"{prefix}-s", r, 4) for r in range(4)]
    assert [s.tolist() for s in shards] == [[5.0], [6.0], [], []]
    h = header(store.get(f"{prefix}-s_tp_3"))
    assert h["global_shape"][:2] == (2, -1) and h["local_shape"][:2] == (0, -1)
    assert (h["data_bytes"], h["axes"][0]) == (0, (1, 0, 3, 4, 0, 0, 0))
    assert store.batch_pub_tensor_with_tp([f"{prefix}-b"], [v], None, 0, 2, 0) == [0]
    assert same(store.get_tensor_with_tp(f"{prefix}-b", 1, 2), v[1:])


def test_tensor_parallel_into_registered_memory(store, prefix, registered):
    ptr, size = registered
    w = torch.arange(12, dtype=torch.float32).reshape(4, 3)
    assert store.put_tensor_with_tp(f"{prefix}-w", w, tp_size=2) == 0
    shard = store.get_tensor_with_tp_into(f"{prefix}-w", ptr, size, tp_rank=1, tp_size=2)
    assert same(shard, w[2:].contiguous()) and ptr <= shard.data_ptr() < ptr + size
    got = store.batch_get_tensor_with_tp_into([f"{prefix}-w"], [ptr], [size], 0, 2)
    assert same(got[0], w[:2].contiguous())


# ---- registered memory ----

def test_get_tensor_into_views_registered_memory(store, prefix, registered):
    ptr, size = registered
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
    got = store.batch_get_tensor_into([f"{prefix}-t", f"{prefix}-missing"], [ptr, ptr],
                                      [size, size])
    assert same(got[0], t) and got[1] is None
    assert store.batch_get_tensor_into([f"{prefix}-t"], [0], [size]) == [INVALID]
    assert store.batch_get_tensor_into([f"{prefix}-t"], [ptr, ptr], [size]) == [INVALID]
    assert store.batch_get_tensor_into([], [], []) == []


def test_put_tensor_from_stores_the_serialized_bytes(store, prefix, registered):
    ptr, size = registered
    t = random_tensor(torch.bfloat16, (4, 8))
    data = serialize_tensor(t)
    write_at(ptr, data)
    assert store.put_tensor_from(f"{prefix}-a", ptr, len(data)) == 0
    assert store.get(f"{prefix}-a") == data and same(store.get_tensor(f"{prefix}-a"), t)
    # Not a serialized tensor (or a wrong size): INVALID_PARAMS, nothing stored.
    assert store.put_tensor_from(f"{prefix}-b", ptr, len(data) - 1) == INVALID
    assert store.put_tensor_from(f"{prefix}-b", ptr, 100) == INVALID
    assert store.put_tensor_from(f"{prefix}-b", 0, len(data)) == INVALID
    assert store.is_exist(f"{prefix}-b") == 0
    # A batch: two tensors side by side in the buffer, one of them zero-size.
    empty = serialize_tensor(torch.empty(0, 2, dtype=torch.int16))
    write_at(ptr + 4096, empty)
    keys = [f"{prefix}-c", f"{prefix}-d"]
    assert store.batch_put_tensor_from(keys, [ptr, ptr + 4096], [len(data), len(empty)]) == [0, 0]
    assert store.get(keys[0]) == data and store.get(keys[1]) == empty
    assert same(store.get_tensor(keys[1]), torch.empty(0, 2, dtype=torch.int16))
    # One invalid buffer makes every entry INVALID_PARAMS, and none is stored.
    keys = [f"{prefix}-e", f"{prefix}-f"]
    write_at(ptr + 8192, b"\0" * 400)
    assert store.batch_put_tensor_from(keys, [ptr, ptr + 8192], [len(data), 400]) == [INVALID] * 2
    assert store.batch_is_exist(keys) == [0, 0]
    assert store.batch_put_tensor_from(keys, [ptr], [len(data), 400]) == [INVALID] * 2
    assert store.batch_put_tensor_from([], [], []) == []


def test_upsert_tensor_from_replaces(store, prefix, registered):
    ptr, size = registered
    old, new = serialize_tensor(torch.zeros(3)), serialize_tensor(torch.arange(5))
    write_at(ptr, old)
    write_at(ptr + 4096, new)
    assert store.upsert_tensor_from(f"{prefix}-a", ptr, len(old)) == 0  # inserts
    assert store.upsert_tensor_from(f"{prefix}-a", ptr + 4096, len(new)) == 0  # replaces
    assert store.upsert_tensor_from(f"{prefix}-a", ptr + 4096, 10) == INVALID
    keys = [f"{prefix}-b", f"{prefix}-c"]
    assert store.batch_upsert_tensor_from(keys, [ptr, ptr], [len(old)] * 2) == [0, 0]
    assert store.batch_upsert_tensor_from(keys, [ptr + 4096] * 2, [len(new)] * 2) == [0, 0]
    assert store.batch_upsert_tensor_from(keys, [ptr, ptr], [len(old), 1]) == [INVALID] * 2
    assert store.batch_upsert_tensor_from([], [], []) == []
    for key in [f"{prefix}-a"] + keys:
        assert store.get(key) == new


def test_put_tensor_with_tp_from_shards_the_full_tensor(store, prefix, registered):
    ptr, size = registered
    w = torch.arange(24, dtype=torch.int32).reshape(4, 6)
    data = serialize_tensor(w)
    write_at(ptr, data)
    assert store.put_tensor_with_tp_from(f"{prefix}-w", ptr, len(data), tp_size=3,
                                         split_dim=1) == 0
    for rank in range(3):
        got = store.get_tensor_with_tp(f"{prefix}-w", rank, 3)
        assert same(got, w[:, 2 * rank:2 * rank + 2].contiguous())
    assert store.put_tensor_with_tp_from(f"{prefix}-x", ptr, len(data) + 1, tp_size=2) == INVALID
    keys = [f"{prefix}-b", f"{prefix}-c"]
    assert store.batch_put_tensor_with_tp_from(keys, [ptr, ptr], [len(data)] * 2, 0, 2, 0) == [0, 0]
    assert same(store.get_tensor_with_tp(keys[1], 1, 2), w[2:].contiguous())
    assert store.batch_put_tensor_with_tp_from(keys, [ptr], [len(data)] * 2) == [INVALID] * 2
    assert store.batch_put_tensor_with_tp_from([], [], []) == []


# ---- upsert and pub ----

def test_upsert_and_pub_tensor(store, prefix):
    k = f"{prefix}-k"
    assert store.pub_tensor(k, torch.zeros(3)) == 0
    assert store.upsert_tensor(k, torch.ones(4)) == 0
    assert same(store.get_tensor(k), torch.ones(4))
    assert store.upsert_tensor(k, torch.ones(5)) == 0  # a reader's lease does not block it
    assert same(store.get_tensor(k), torch.ones(5))


def test_upsert_pub_tensor_and_batches(store, prefix):
    config = ReplicateConfig()
    keys = [f"{prefix}-a", f"{prefix}-b"]
    assert store.upsert_pub_tensor(keys[0], torch.zeros(2), config) == 0
    assert store.upsert_pub_tensor(keys[0], torch.ones(2)) == 0
    assert store.batch_upsert_pub_tensor(keys, [torch.ones(1), torch.ones(3)], config) == [0, 0]
    assert store.batch_upsert_tensor(keys, [torch.ones(2), torch.ones(4)]) == [0, 0]
    assert store.batch_pub_tensor([f"{prefix}-c"], [torch.ones(1)], config) == [0]
    assert [t.tolist() for t in store.batch_get_tensor(keys)] == [[1.0] * 2, [1.0] * 4]
    # Mooncake's pub check: preferred_segments, when given, name every replica.
    bad = ReplicateConfig()
    bad.replica_num, bad.preferred_segments = 2, ["127.0.0.1:1"]
    assert store.pub_tensor(f"{prefix}-d", torch.ones(1), bad) == INVALID
    assert store.upsert_pub_tensor(f"{prefix}-d", torch.ones(1), bad) == INVALID
    assert store.pub_tensor_with_tp(f"{prefix}-d", torch.ones(2), bad, 0, 2) == INVALID
    # Empty batches and length mismatches.
    for call in (store.batch_put_tensor, store.batch_pub_tensor, store.batch_upsert_tensor,
                 store.batch_upsert_pub_tensor, store.batch_put_tensor_with_tp,
                 store.batch_pub_tensor_with_tp):
        assert call([], []) == []
        assert call(keys, [torch.ones(1)]) == [INVALID] * 2, call


# ---- safetensors files ----

def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file, parsed by hand."""
    raw = path.read_bytes()
    (n,) = struct.unpack_from("<Q", raw)
    assert n % 8 == 0
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def test_save_tensor_to_safetensor_writes_a_real_file(store, prefix, tmp_path, monkeypatch):
    t = random_tensor(torch.bfloat16, (2, 3))
    key = f"{prefix}-t"
    assert store.put_tensor(key, t) == 0
    path = tmp_path / "t.safetensors"
    assert store.save_tensor_to_safetensor(key, str(path)) == 0
    head, data = read_safetensors(path)
    assert head == {key: {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}
    assert data == raw_bytes(t)
    assert same(safetensors_file.load_file(path)[key], t)
    monkeypatch.chdir(tmp_path)  # no file_name: the file is named by the key
    assert store.save_tensor_to_safetensor(key) == 0
    assert read_safetensors(tmp_path / key)[1] == raw_bytes(t)
    missing = store.save_tensor_to_safetensor(f"{prefix}-missing", str(path))
    assert missing == ErrorCode.FILE_NOT_FOUND == -1100
    assert store.save_tensor_to_safetensor(key, str(tmp_path / "no-dir" / "f")) == INVALID


def test_load_tensor_from_safetensor(store, prefix, tmp_path):
    t = torch.arange(10, dtype=torch.int64)
    path = tmp_path / "t.safetensors"
    safetensors_file.save_file({"x": t}, path)
    # key None: stored under the file name.
    assert same(store.load_tensor_from_safetensor(file_name=str(path)), t)
    assert same(store.get_tensor(str(path)), t)
    # A key the file lacks: its first tensor, stored under the key.
    assert same(store.load_tensor_from_safetensor(f"{prefix}-k", str(path)), t)
    assert same(store.get_tensor(f"{prefix}-k"), t)
    with pytest.raises(TypeError):
        store.load_tensor_from_safetensor(f"{prefix}-k")


def hand_built_safetensors(names):
    """A safetensors file assembled byte by byte: F16 [2, 2] and I64 [3], with metadata."""
    head = {"__metadata__": {"format": "pt"},
            names[0]: {"dtype": "F16", "shape": [2, 2], "data_offsets": [0, 8]},
            names[1]: {"dtype": "I64", "shape": [3], "data_offsets": [8, 32]}}
    text = json.dumps(head).encode()
    text += b" " * (-len(text) % 8)
    data = struct.pack("<4e", 1.0, -2.0, 0.5, 65504.0) + struct.pack("<3q", 7, -8, 1 << 40)
    return struct.pack("<Q", len(text)) + text + data


def test_load_a_hand_built_safetensors_file(store, prefix, tmp_path):
    names = [f"{prefix}-w", f"{prefix}-ids"]
    path = tmp_path / "hand.safetensors"
    path.write_bytes(hand_built_safetensors(names))
    ids = store.load_tensor_from_safetensor(names[1], str(path))  # the entry named by the key
    assert same(ids, torch.tensor([7, -8, 1 << 40]))
    assert same(store.get_tensor(names[1]), ids)
    w = store.load_tensor_from_safetensor(f"{prefix}-other", str(path))  # the first entry
    assert same(w, torch.tensor([[1.0, -2.0], [0.5, 65504.0]], dtype=torch.float16))
    loaded = safetensors_file.load_file(path)
    assert list(loaded) == names and same(loaded[names[0]], w)


def test_corrupt_safetensors_files(store, prefix, tmp_path):
    good = hand_built_safetensors(["a", "b"])
    (n,) = struct.unpack_from("<Q", good)
    head = json.loads(good[8:8 + n])

    def with_header(change):
        h = json.loads(json.dumps(head))
        change(h)
        text = json.dumps(h).encode()
        return struct.pack("<Q", len(text)) + text + good[8 + n:]

    cases = {
        "exceeds the file": struct.pack("<Q", 1 << 40) + good[8:],
        "at least 8 bytes": good[:5],
        "not JSON": struct.pack("<Q", 8) + b"{nojson}" + good[8 + n:],
        "cover 32 bytes": good[:-1],  # truncated data
        "expected 8": with_header(lambda h: h["b"].update(data_offsets=[9, 33])),
        "bytes for shape": with_header(lambda h: h["a"].update(shape=[2, 3])),
        "unknown or unsupported dtype": with_header(lambda h: h["a"].update(dtype="F12")),
        "non-negative ints": with_header(lambda h: h["a"].update(shape=[-2, -2])),
        "__metadata__": with_header(lambda h: h.update(__metadata__={"k": 1})),
    }
    for i, (message, data) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.safetensors"
        path.write_bytes(data)
        with pytest.raises(ValueError, match=message):
            safetensors_file.load_file(path)
        assert store.load_tensor_from_safetensor(f"{prefix}-{i}", str(path)) is None
        assert store.is_exist(f"{prefix}-{i}") == 0
    assert store.load_tensor_from_safetensor(f"{prefix}-x", str(tmp_path / "missing")) is None
    empty = tmp_path / "empty.safetensors"
    safetensors_file.save_file({}, empty)
    assert store.load_tensor_from_safetensor(f"{prefix}-x", str(empty)) is None
