"""``mooncake.store`` on kvtier: the names Mooncake's store module exports, from kvtier.store.

tests/engines/test_mooncake_api_surface.py compares this module with the real wheel's and lists
the names kvtier leaves out on purpose, with the reason."""

import ctypes

from kvtier.store import (  # noqa: F401 (re-exports)
    BufferHandle,
    Descriptor,
    DiskDescriptor,
    ErrorCode,
    MemoryDescriptor,
    MooncakeDistributedStore,
    MooncakeHostMemAllocator,
    ObjectDataType,
    ParallelAxis,
    QueryTaskResponse,
    ReadTarget,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
    TaskStatus,
    TaskType,
    TensorParallelism,
)

from kvtier.store_tensors import deserialize_tensor as _deserialize_tensor  # noqa: F401
from kvtier.store_tensors import serialize_tensor, tensor_metadata_size
from kvtier.store_tensors import tensor_metadata_size as _tensor_metadata_size  # noqa: F401


def _serialize_tensor(tensor):
    """Mooncake's helper: (header bytes, address of the payload, payload bytes, the object that
    owns both), for callers that hand the two parts to put_from_with_metadata."""
    blob = serialize_tensor(tensor)
    header = tensor_metadata_size()
    base = ctypes.cast(ctypes.c_char_p(blob), ctypes.c_void_p).value
    return blob[:header], base + header, len(blob) - header, blob


# Mooncake's module exports the enums' members by name too (pybind's export_values). Where two
# enums share a member name the later one wins there: FAILED is TaskStatus.FAILED.
for _enum in (ObjectDataType, ReplicaStatus, TaskType, TaskStatus):
    globals().update(_enum.__members__)
del _enum

__all__ = ["BufferHandle", "Descriptor", "DiskDescriptor", "ErrorCode", "MemoryDescriptor",
           "MooncakeDistributedStore", "MooncakeHostMemAllocator", "ObjectDataType",
           "ParallelAxis", "QueryTaskResponse", "ReadTarget", "ReplicaDescriptor",
           "ReplicaStatus", "ReplicateConfig", "SoftPinAction", "TaskStatus", "TaskType",
           "TensorParallelism"]
