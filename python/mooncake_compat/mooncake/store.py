"""``mooncake.store`` on kvtier: the names Mooncake's store module exports, from kvtier.store."""

import ctypes

from kvtier.store import (  # noqa: F401 (re-exports)
    BufferHandle,
    Descriptor,
    ErrorCode,
    MemoryDescriptor,
    MooncakeDistributedStore,
    MooncakeHostMemAllocator,
    ObjectDataType,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
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


__all__ = ["BufferHandle", "Descriptor", "ErrorCode", "MemoryDescriptor",
           "MooncakeDistributedStore", "MooncakeHostMemAllocator", "ObjectDataType",
           "ReplicaDescriptor", "ReplicaStatus", "ReplicateConfig", "SoftPinAction"]
