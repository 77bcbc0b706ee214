"""The tensor calls of Mooncake's store API on kvtier.store (PyTorch, CPU tensors).

A stored tensor is one object in Mooncake's current byte layout, so either store reads what the
other wrote: a 304-byte little-endian header (Mooncake's ``TensorMetadata``: magic "NOOM",
version 1, dtype code, ndim <= 8, layout FULL or SHARD, payload offset and length, global and
local shapes padded with -1, up to 4 parallel axes), then the tensor's bytes in C order.
Tensor-parallel forms keep one object per shard, ``f"{key}_tp_{rank}"``, with a SHARD header.
``serialize_tensor``, ``deserialize_tensor`` and ``tensor_metadata_size`` are the codec alone.
torch is imported on first use, so kvtier.store works without it.
"""

import ctypes
import functools
import logging
import struct

from kvtier import safetensors_file
from kvtier.safetensors_file import element_size, import_torch, tensor_from_bytes, tensor_to_bytes

_log = logging.getLogger("kvtier.store")

_INVALID_PARAMS = -600  # Mooncake's ErrorCode values (kvtier.store.ErrorCode)
_FILE_NOT_FOUND = -1100

# Mooncake's TensorMetadata: the object header (magic u32, version u16, header_size u16, dtype
# i32, ndim i32, layout_kind u32, reserved_flags u32, data_offset u64, data_bytes u64), then the
# layout (global_shape i64[8], local_shape i64[8], axis_count u32, reserved0 u32) and 4 axes
# (kind, axis_index, shard_rank, shard_count, split_dim, reserved0: i32; reserved1: i64).
_MAX_DIMS = 8
_MAX_AXES = 4
_AXIS = "iiiiiiq"
_HEADER = struct.Struct("<IHHiiIIQQ" + "q" * (2 * _MAX_DIMS) + "II" + _AXIS * _MAX_AXES)
_AXIS_FIELDS = len(_AXIS)
_MAGIC = 0x4D4F4F4E
_VERSION = 1
_FULL, _SHARD = 0, 1
_AXIS_TP = 1
_AXIS_KINDS = range(5)  # DP, TP, EP, PP, RESERVED
# torch dtype names by Mooncake's TensorDtype code (0..14); older torch lacks some of them.
_DTYPE_NAMES = ("float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                "int64", "uint64", "bool", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


@functools.lru_cache(maxsize=None)
def _dtypes():
    """(torch dtype or None by code, {torch dtype: code}) for this torch."""
    torch = import_torch()
    by_code = tuple(getattr(torch, name, None) for name in _DTYPE_NAMES)
    return by_code, {dtype: code for code, dtype in enumerate(by_code) if dtype is not None}


def _padded(dims):
    return [int(n) for n in dims] + [-1] * (_MAX_DIMS - len(dims))


def _serialize(tensor, global_shape=None, axis=None, axes=None):
    """[header][payload] of a CPU tensor: FULL, or SHARD of `global_shape` with one `axis` or
    up to 4 `axes` (each the 7 fields of a layout axis). Raises TypeError for a non-tensor,
    ValueError for a tensor Mooncake's layout cannot hold (not on the CPU, more than 8 dims, an
    unknown dtype)."""
    payload = tensor_to_bytes(tensor)
    code = _dtypes()[1].get(tensor.dtype)
    if code is None:
        raise ValueError(f"dtype {tensor.dtype} has no Mooncake TensorDtype code")
    if tensor.dim() > _MAX_DIMS:
        raise ValueError(f"{tensor.dim()} dimensions: Mooncake's layout holds at most {_MAX_DIMS}")
    axes = list(axes) if axes else ([axis] if axis else [])
    unused_axes = [0] * (_AXIS_FIELDS * (_MAX_AXES - len(axes)))
    header = _HEADER.pack(
        _MAGIC, _VERSION, _HEADER.size, code, tensor.dim(), _SHARD if axes else _FULL, 0,
        _HEADER.size, memoryview(payload).nbytes,
        *_padded(tensor.shape if global_shape is None else global_shape), *_padded(tensor.shape),
        len(axes), 0, *(f for a in axes for f in a), *unused_axes)
    return b"".join((header, payload))


def _parse(view):
    """(torch dtype, local shape, data_offset) of a [header][payload] memoryview, or None when
    Mooncake's ValidateTensorMetadata would refuse it or this torch has no such dtype."""
    if len(view) < _HEADER.size:
        return None
    fields = _HEADER.unpack_from(view)
    magic, version, header_size, code, ndim, layout, _, offset, nbytes = fields[:9]
    global_shape, local_shape = fields[9:17], fields[17:25]
    axis_count, axes = fields[25], fields[27:]
    if (magic, version, header_size) != (_MAGIC, _VERSION, _HEADER.size):
        return None
    if not (0 <= code < len(_DTYPE_NAMES) and 0 <= ndim <= _MAX_DIMS and axis_count <= _MAX_AXES
            and layout <= _SHARD and _HEADER.size <= offset <= len(view)
            and nbytes == len(view) - offset):
        return None
    if any(n < 0 for n in global_shape[:ndim] + local_shape[:ndim]):  # 0: zero-size tensors
        return None
    if any(n != -1 for n in global_shape[ndim:] + local_shape[ndim:]):
        return None
    for i in range(axis_count):
        kind, _, rank, count, split_dim = axes[i * _AXIS_FIELDS:i * _AXIS_FIELDS + 5]
        if kind not in _AXIS_KINDS or not 0 <= rank < count or not -1 <= split_dim < ndim:
            return None
    dtype = _dtypes()[0][code]
    shape = list(local_shape[:ndim])
    count = 1
    for n in shape:
        count *= n
    if dtype is None or nbytes != count * element_size(dtype):
        return None
    return dtype, shape, offset


def _deserialize(buffer):
    """The tensor in `buffer` ([header][payload], bytes-like) of its local shape, or None.
    It views a writable buffer (no copy); a read-only one is copied."""
    view = memoryview(buffer).cast("B")
    parsed = _parse(view)
    if parsed is None:
        return None
    dtype, shape, offset = parsed
    return tensor_from_bytes(view[offset:], dtype, shape)


def _memory(buffer_ptr, size):
    """A writable memoryview of `size` bytes at address `buffer_ptr`, or None for a null
    pointer or a size too small for a header."""
    if not buffer_ptr or size < _HEADER.size:
        return None
    return memoryview((ctypes.c_uint8 * size).from_address(buffer_ptr)).cast("B")


def _tensor_at(buffer_ptr, size):
    """A tensor viewing the serialized tensor at `buffer_ptr` (no copy), or None."""
    memory = _memory(buffer_ptr, size)
    return None if memory is None else _deserialize(memory)


def _valid_at(buffer_ptr, size):
    """Whether `size` bytes at `buffer_ptr` are one serialized tensor."""
    memory = _memory(buffer_ptr, size)
    return memory is not None and _parse(memory) is not None


def serialize_tensor(tensor):
    """Mooncake's bytes of a CPU tensor: the 304-byte header, then the payload. Raises
    TypeError for a non-tensor, ValueError for a tensor the layout cannot hold."""
    return _serialize(tensor)


def tensor_metadata_size():
    """The header's size in bytes: 304, Mooncake's sizeof(TensorMetadata)."""
    return _HEADER.size


def deserialize_tensor(data):
    """The tensor in `data` (bytes-like, [header][payload]), or None when it is not one. The
    tensor views `data` when it is writable (bytearray, writable memoryview), else copies."""
    return _deserialize(data)


def _shard_key(key, rank, size):
    return key if size <= 1 else f"{key}_tp_{rank}"


def _shard_values(tensor, tp_size, split_dim):
    """Mooncake's TP shards of `tensor`: [header][payload] per rank, rank r holding the slice
    [r*chunk, r*chunk + chunk) of `split_dim` cut to the tensor (chunk = ceil(dim / tp_size);
    empty past the end). None when tp_size < 1 or split_dim is not a dimension."""
    if not isinstance(tensor, import_torch().Tensor):
        raise TypeError(f"expected a torch.Tensor, not {type(tensor).__name__}")
    if tp_size < 1 or not 0 <= split_dim < tensor.dim():
        return None
    dim = tensor.shape[split_dim]
    chunk = -(-dim // tp_size)
    values = []
    for rank in range(tp_size):
        start = min(rank * chunk, dim)
        shard = tensor.narrow(split_dim, start, min(chunk, dim - start))
        axis = (_AXIS_TP, 0, rank, tp_size, split_dim, 0, shard.shape[split_dim])
        values.append(_serialize(shard, tensor.shape, axis))
    return values


def _config_ok(config):
    """Mooncake's check on pub calls: preferred_segments, when given, name every replica."""
    segments = getattr(config, "preferred_segments", None) or []
    return not segments or len(segments) == getattr(config, "replica_num", len(segments))


def _refused(what, error):
    _log.error("%s: %s", what, error)
    return _INVALID_PARAMS


def _first_error(codes):
    """0 when every code is 0, else the first that is not (all are computed: every call runs)."""
    return next((c for c in list(codes) if c != 0), 0)


def _rows(call, *columns):
    """call(*row) for each row of the equally long `columns`; INVALID_PARAMS for every entry of
    the first column when their lengths differ."""
    n = len(columns[0])
    if any(len(c) != n for c in columns[1:]):
        return [_INVALID_PARAMS] * n
    return [call(*row) for row in zip(*columns)]


class TensorCalls:
    """Mixed into kvtier.store.DistributedStore: Mooncake's tensor methods over put/get.

    Writes return 0 or a negative ErrorCode (INVALID_PARAMS for a tensor Mooncake's layout
    cannot hold); a non-tensor raises TypeError. Batch forms return one entry per key ([] for
    no keys), every entry INVALID_PARAMS when the argument lists differ in length.
    """

    # ---- whole tensors ----

    def put_tensor(self, key, tensor):
        """Stores a CPU tensor (dtype and shape kept). 0 or a negative ErrorCode."""
        return self._store(self.put, key, tensor, None)

    def pub_tensor(self, key, tensor, config=None):
        """put_tensor with a ReplicateConfig. 0 or a negative ErrorCode."""
        return self._store(self.put, key, tensor, config)

    def upsert_tensor(self, key, tensor):
        """put_tensor that replaces an existing value (see upsert). 0 or a negative ErrorCode."""
        return self._store(self.upsert, key, tensor, None)

    def upsert_pub_tensor(self, key, tensor, config=None):
        """upsert_tensor with a ReplicateConfig. 0 or a negative ErrorCode."""
        return self._store(self.upsert, key, tensor, config)

    def batch_put_tensor(self, keys, tensors_list):
        """put_tensor of each: a list of 0 / negative ErrorCode."""
        return _rows(self.put_tensor, keys, tensors_list)

    def batch_pub_tensor(self, keys, tensors_list, config=None):
        """pub_tensor of each: a list of 0 / negative ErrorCode."""
        return _rows(lambda k, t: self.pub_tensor(k, t, config), keys, tensors_list)

    def batch_upsert_tensor(self, keys, tensors_list):
        """upsert_tensor of each: a list of 0 / negative ErrorCode."""
        return _rows(self.upsert_tensor, keys, tensors_list)

    def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
        """upsert_pub_tensor of each: a list of 0 / negative ErrorCode."""
        return _rows(lambda k, t: self.upsert_pub_tensor(k, t, config), keys, tensors_list)

    def get_tensor(self, key):
        """The tensor (its own memory; a shard has its local shape), or None when missing or
        not a stored tensor."""
        raw = self.get(key)
        return _deserialize(raw) if raw else None

    def batch_get_tensor(self, keys):
        """get_tensor of each: a list of tensors, None where missing."""
        return [self.get_tensor(k) for k in keys]

    # ---- registered memory ----

    def get_tensor_into(self, key, buffer_ptr, size):
        """Reads the stored tensor into registered memory (see get_into) and returns a tensor
        viewing that memory (no copy), or None."""
        n = self.get_into(key, buffer_ptr, size)
        return _tensor_at(buffer_ptr, n) if n > 0 else None

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        """get_tensor_into of each: a list of tensors / None; a list of INVALID_PARAMS ints when
        the lists differ in length or a pointer is null (as Mooncake)."""
        if not len(keys) == len(buffer_ptrs) == len(sizes) or not all(buffer_ptrs):
            return [_INVALID_PARAMS] * len(keys)
        return [self.get_tensor_into(k, p, n) for k, p, n in zip(keys, buffer_ptrs, sizes)]

    def put_tensor_from(self, key, buffer_ptr, size):
        """Stores the serialized tensor ([header][payload], `size` bytes) in registered memory
        as it is (put_from, no copy). 0, INVALID_PARAMS when it is not a serialized tensor, or
        another negative ErrorCode."""
        if not _valid_at(buffer_ptr, size):
            return _INVALID_PARAMS
        return self.put_from(key, buffer_ptr, size)

    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
        """put_tensor_from of each, in one batch_put_from: a list of 0 / negative ErrorCode;
        every entry INVALID_PARAMS when any buffer is not a serialized tensor (as Mooncake)."""
        return self._store_serialized(self.batch_put_from, keys, buffer_ptrs, sizes)

    def upsert_tensor_from(self, key, buffer_ptr, size):
        """put_tensor_from that replaces an existing value (upsert_from). 0 or a negative
        ErrorCode."""
        if not _valid_at(buffer_ptr, size):
            return _INVALID_PARAMS
        return self.upsert_from(key, buffer_ptr, size)

    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
        """upsert_tensor_from of each: a list of 0 / negative ErrorCode; every entry
        INVALID_PARAMS when any buffer is not a serialized tensor."""
        return self._store_serialized(self.batch_upsert_from, keys, buffer_ptrs, sizes)

    # ---- tensor parallelism ----

    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        """Splits `tensor` into `tp_size` shards along `split_dim` as Mooncake does (ranks past
        the end get empty shards) and stores every shard as ``{key}_tp_{rank}`` (the whole
        tensor under `key` when tp_size is 1). `tp_rank` is ignored, as in Mooncake. 0 when
        every shard was stored, else the first error (INVALID_PARAMS for a bad tp_size or
        split_dim)."""
        return self.pub_tensor_with_tp(key, tensor, None, tp_rank, tp_size, split_dim)

    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
        """put_tensor_with_tp with a ReplicateConfig. 0 or the first negative ErrorCode."""
        del tp_rank  # every shard is written
        if tp_size == 1:
            return self.pub_tensor(key, tensor, config)
        try:
            values = _shard_values(tensor, tp_size, split_dim)
        except ValueError as e:
            return _refused("pub_tensor_with_tp", e)
        if values is None or not _config_ok(config):
            return _INVALID_PARAMS
        return _first_error([self.put(_shard_key(key, r, tp_size), v, config)
                             for r, v in enumerate(values)])

    def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        """put_tensor_with_tp of the full serialized tensor at `buffer_ptr` (`size` bytes; read
        in place, need not be registered). 0, INVALID_PARAMS when it is not a serialized
        tensor, or the first negative ErrorCode."""
        tensor = _tensor_at(buffer_ptr, size)
        if tensor is None:
            return _INVALID_PARAMS
        return self.put_tensor_with_tp(key, tensor, tp_rank, tp_size, split_dim)

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1,
                                 split_dim=0):
        """put_tensor_with_tp of each: a list of 0 / negative ErrorCode."""
        return _rows(lambda k, t: self.put_tensor_with_tp(k, t, tp_rank, tp_size, split_dim),
                     base_keys, tensors_list)

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0,
                                 tp_size=1, split_dim=0):
        """pub_tensor_with_tp of each: a list of 0 / negative ErrorCode."""
        return _rows(lambda k, t: self.pub_tensor_with_tp(k, t, config, tp_rank, tp_size,
                                                          split_dim),
                     base_keys, tensors_list)

    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1,
                                      split_dim=0):
        """put_tensor_with_tp_from of each: a list of 0 / negative ErrorCode."""
        return _rows(lambda k, p, n: self.put_tensor_with_tp_from(k, p, n, tp_rank, tp_size,
                                                                  split_dim),
                     base_keys, buffer_ptrs, sizes)

    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        """Rank `tp_rank`'s shard (``{key}_tp_{tp_rank}``; `key` itself when tp_size is 1), a
        tensor of the shard's shape, or None."""
        del split_dim  # unused, as in Mooncake
        return self.get_tensor(_shard_key(key, tp_rank, tp_size))

    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        """get_tensor_with_tp of each: a list of tensors, None where missing."""
        return [self.get_tensor_with_tp(k, tp_rank, tp_size) for k in base_keys]

    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        """get_tensor_into of rank `tp_rank`'s shard: a tensor viewing the buffer, or None."""
        del split_dim
        return self.get_tensor_into(_shard_key(key, tp_rank, tp_size), buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1):
        """get_tensor_with_tp_into of each (see batch_get_tensor_into for the error list)."""
        return self.batch_get_tensor_into([_shard_key(k, tp_rank, tp_size) for k in base_keys],
                                          buffer_ptrs, sizes)

    # ---- safetensors files ----

    def save_tensor_to_safetensor(self, key, file_name=None):
        """Writes the stored tensor to a safetensors file `file_name` (default: the key), the
        tensor named by the key. 0, FILE_NOT_FOUND (-1100) when the key holds no tensor, or
        INVALID_PARAMS when the file cannot be written (the reason is logged)."""
        tensor = self.get_tensor(key)
        if tensor is None:
            return _FILE_NOT_FOUND
        try:
            safetensors_file.save_file({key: tensor}, file_name or key)
        except (OSError, ValueError, TypeError) as e:
            return _refused("save_tensor_to_safetensor", e)
        return 0

    def load_tensor_from_safetensor(self, key=None, file_name=None):
        """Stores a tensor of the safetensors file `file_name` (required) with put_tensor under
        `key`, or under `file_name` when key is None: the file's tensor named `key`, else its
        first. Returns the tensor, or None when the file is unreadable or empty or the put
        fails (the reason is logged)."""
        if file_name is None:
            raise TypeError("load_tensor_from_safetensor() needs file_name")
        try:
            tensors = safetensors_file.load_file(file_name)
        except (OSError, ValueError) as e:
            _log.error("load_tensor_from_safetensor: %s: %s", file_name, e)
            return None
        if not tensors:
            return None
        if key is not None and key not in tensors:
            _log.warning("load_tensor_from_safetensor: %s has no tensor %r; using its first",
                         file_name, key)
        tensor = tensors.get(key, next(iter(tensors.values())))
        return tensor if self.put_tensor(file_name if key is None else key, tensor) == 0 else None

    # ---- shared ----

    def _store(self, put, key, tensor, config):
        """put(key, serialized tensor, config); INVALID_PARAMS for a tensor the layout cannot
        hold or a config Mooncake refuses."""
        try:
            value = _serialize(tensor)
        except ValueError as e:
            return _refused("put_tensor", e)
        if not _config_ok(config):
            return _INVALID_PARAMS
        return put(key, value, config)

    @staticmethod
    def _store_serialized(put_batch, keys, buffer_ptrs, sizes):
        """put_batch(keys, buffer_ptrs, sizes) once every buffer is a serialized tensor, else
        a list of INVALID_PARAMS (also for lists of different lengths)."""
        if not len(keys) == len(buffer_ptrs) == len(sizes):
            return [_INVALID_PARAMS] * len(keys)
        if not all(_valid_at(p, n) for p, n in zip(buffer_ptrs, sizes)):
            return [_INVALID_PARAMS] * len(keys)
        return put_batch(keys, buffer_ptrs, sizes) if keys else []
