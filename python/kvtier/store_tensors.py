"""The tensor calls of Mooncake's store API on kvtier.store (PyTorch, CPU tensors).

A stored tensor is one object: a header (magic, JSON of dtype and shape) and the tensor's bytes
in C order. Tensor-parallel forms keep one object per shard, named ``f"{key}_tp_{rank}"`` as in
Mooncake. torch is imported on first use, so kvtier.store works without it.
"""

import ctypes
import json
import struct

_MAGIC = b"KVTT"
_PREFIX = struct.Struct("<4sI")  # magic, header length (JSON, padded to 8 bytes)


def _torch():
    try:
        import torch
    except ImportError as e:
        raise ImportError("the tensor calls of kvtier.store need PyTorch (python3-torch)") from e
    return torch


def _encode_header(tensor):
    meta = json.dumps({"dtype": str(tensor.dtype).replace("torch.", ""),
                       "shape": list(tensor.shape)}).encode()
    meta += b" " * (-(_PREFIX.size + len(meta)) % 8)
    return _PREFIX.pack(_MAGIC, len(meta)) + meta


def _serialize(tensor):
    torch = _torch()
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"expected a torch.Tensor, not {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError("only CPU tensors are supported (no GPU path in the kvtier store yet)")
    flat = tensor.detach().contiguous().reshape(-1)
    raw = flat.view(torch.uint8).numpy() if flat.numel() else b""
    return b"".join((_encode_header(tensor), memoryview(raw)))  # the one copy of the bytes


def _deserialize(buffer):
    """A tensor over `buffer` (bytes-like, writable for a zero-copy view), or None."""
    torch = _torch()
    view = memoryview(buffer).cast("B")
    if len(view) < _PREFIX.size:
        return None
    magic, meta_len = _PREFIX.unpack_from(view)
    start = _PREFIX.size + meta_len
    if magic != _MAGIC or start > len(view):
        return None
    try:
        meta = json.loads(bytes(view[_PREFIX.size:start]))
        dtype = getattr(torch, meta["dtype"])
        shape = [int(n) for n in meta["shape"]]
    except (ValueError, KeyError, AttributeError, TypeError):
        return None
    count = 1
    for n in shape:
        count *= n
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    if start + nbytes > len(view):
        return None
    if nbytes == 0:
        return torch.empty(shape, dtype=dtype)
    data = torch.frombuffer(view[start:start + nbytes], dtype=torch.uint8)
    return data.view(dtype).reshape(shape)


def _shard_key(key, rank, size):
    return key if size <= 1 else f"{key}_tp_{rank}"


class TensorCalls:
    """Mixed into kvtier.store.DistributedStore: Mooncake's tensor methods over put/get."""

    def put_tensor(self, key, tensor):
        """Stores a CPU tensor (dtype and shape kept). 0 or a negative ErrorCode."""
        return self.put(key, _serialize(tensor))

    def pub_tensor(self, key, tensor, config=None):
        """put_tensor with a ReplicateConfig."""
        return self.put(key, _serialize(tensor), config)

    def upsert_tensor(self, key, tensor):
        """put_tensor that replaces an existing value (see upsert)."""
        return self.upsert(key, _serialize(tensor))

    def get_tensor(self, key):
        """The tensor, or None when missing or not a stored tensor."""
        raw = self.get(key)
        return _deserialize(bytearray(raw)) if raw else None

    def batch_put_tensor(self, keys, tensors_list):
        """put_tensor of each: a list of 0 / negative ErrorCode."""
        return [self.put_tensor(k, t) for k, t in zip(keys, tensors_list, strict=True)]

    def batch_pub_tensor(self, keys, tensors_list, config=None):
        return [self.pub_tensor(k, t, config) for k, t in zip(keys, tensors_list, strict=True)]

    def batch_upsert_tensor(self, keys, tensors_list):
        return [self.upsert_tensor(k, t) for k, t in zip(keys, tensors_list, strict=True)]

    def batch_get_tensor(self, keys):
        """get_tensor of each: a list of tensors, None where missing."""
        return [self.get_tensor(k) for k in keys]

    def get_tensor_into(self, key, buffer_ptr, size):
        """Reads the stored tensor into registered memory (see get_into) and returns a tensor
        viewing that memory (no copy), or None."""
        n = self.get_into(key, buffer_ptr, size)
        if n <= 0:
            return None
        return _deserialize((ctypes.c_uint8 * n).from_address(buffer_ptr))

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        return [self.get_tensor_into(k, p, n) for k, p, n in zip(keys, buffer_ptrs, sizes,
                                                                  strict=True)]

    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        """Splits `tensor` into `tp_size` shards along `split_dim` and stores every shard as
        ``{key}_tp_{rank}`` (the whole tensor under `key` when tp_size is 1). 0, or the first
        error. (`tp_rank` is accepted as in Mooncake; every shard is written.)"""
        del tp_rank
        return self.pub_tensor_with_tp(key, tensor, None, 0, tp_size, split_dim)

    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
        del tp_rank
        if tp_size < 1:
            return -600
        if tp_size == 1:
            return self.pub_tensor(key, tensor, config)
        shards = _torch().chunk(tensor, tp_size, dim=split_dim)
        if len(shards) != tp_size:
            return -600  # fewer elements along split_dim than shards
        codes = [self.pub_tensor(_shard_key(key, r, tp_size), s, config)
                 for r, s in enumerate(shards)]
        return next((c for c in codes if c != 0), 0)  # every shard is written either way

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1,
                                 split_dim=0):
        return [self.put_tensor_with_tp(k, t, tp_rank, tp_size, split_dim)
                for k, t in zip(base_keys, tensors_list, strict=True)]

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0,
                                 tp_size=1, split_dim=0):
        return [self.pub_tensor_with_tp(k, t, config, tp_rank, tp_size, split_dim)
                for k, t in zip(base_keys, tensors_list, strict=True)]

    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        """Rank `tp_rank`'s shard (``{key}_tp_{tp_rank}``; `key` itself when tp_size is 1)."""
        del split_dim
        return self.get_tensor(_shard_key(key, tp_rank, tp_size))

    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        return [self.get_tensor_with_tp(k, tp_rank, tp_size) for k in base_keys]

    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        del split_dim
        return self.get_tensor_into(_shard_key(key, tp_rank, tp_size), buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1):
        return [self.get_tensor_with_tp_into(k, p, n, tp_rank, tp_size)
                for k, p, n in zip(base_keys, buffer_ptrs, sizes, strict=True)]
