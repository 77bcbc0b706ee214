"""Helpers of the differential tests (no tests of its own; named test_mooncake_api_* to sit with
them). Mooncake's own `mooncake_master` (from the installed wheel) beside a real kvtier master and
node, and one embedded store client of each, for the differential tests: the same call with the
same arguments goes to both, and the results are compared in a normalised form."""

import ctypes
import sys
from pathlib import Path

import mooncake.store as wheel
from kvtier.store import MooncakeDistributedStore as KvtierStore

# The wheel's mooncake_master / mooncake_client are started by the peer bench's launchers (one
# launcher for the bench and the tests); appended, so bench/ shadows no module of the tests.
sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))
from peer_clusters import start_mooncake_client, start_mooncake_master  # noqa: E402,F401


def setup_embedded(store, master_address, segment=64 << 20, local=16 << 20):
    return store.setup("127.0.0.1", "P2PHANDSHAKE", segment, local, "tcp", "", master_address)


def new_pair(wheel_master, kvtier_cluster, **sizes):
    """(wheel client, kvtier client), each an embedded node of its own master."""
    w, k = wheel.MooncakeDistributedStore(), KvtierStore()
    assert setup_embedded(w, wheel_master.address, **sizes) == 0, wheel_master.log_text()
    assert setup_embedded(k, kvtier_cluster.master_address, **sizes) == 0, kvtier_cluster.logs()
    return w, k


class Memory:
    """A block of process memory registered with a store (one per store: each registers its
    own), read and written by offset."""

    def __init__(self, store, size=1 << 20):
        self.buf = (ctypes.c_uint8 * size)()
        self.ptr = ctypes.addressof(self.buf)
        self.size = size
        assert store.register_buffer(self.ptr, size) == 0

    @classmethod
    def from_pool(cls, store, size=1 << 20):
        """Memory of the store's shared pool (alloc_from_mem_pool): what a dummy client may
        register with Mooncake's real client (other process memory it refuses)."""
        mem = cls.__new__(cls)
        mem.ptr, mem.size = store.alloc_from_mem_pool(size), size
        assert mem.ptr and store.register_buffer(mem.ptr, size) == 0
        return mem

    def write(self, offset, data):
        ctypes.memmove(self.ptr + offset, bytes(data), len(data))

    def read(self, offset, n):
        return ctypes.string_at(self.ptr + offset, n)

    def fill(self, byte=0):
        ctypes.memset(self.ptr, byte, self.size)


def normalise(value):
    """A comparable form: tensors as (dtype, shape, bytes), buffer handles as bytes, enums as
    ints, containers element-wise."""
    import torch
    if isinstance(value, torch.Tensor):
        flat = value.detach().contiguous().reshape(-1)
        return ("tensor", str(value.dtype), tuple(value.shape),
                bytes(flat.view(torch.uint8).numpy()) if flat.numel() else b"")
    if isinstance(value, (list, tuple)):
        return type(value).__name__, [normalise(v) for v in value]
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if hasattr(value, "ptr") and hasattr(value, "size") and callable(value.size):
        return ("buffer", ctypes.string_at(value.ptr(), value.size()))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    return value


def call(store, name, *args, **kwargs):
    """normalise(store.name(*args, **kwargs)), or ("raises", exception type name)."""
    try:
        return normalise(getattr(store, name)(*args, **kwargs))
    except Exception as e:  # the type is what is compared
        return ("raises", type(e).__name__)
