"""``mooncake.store`` on kvtier: the names Mooncake's store module exports, from kvtier.store."""

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

__all__ = ["BufferHandle", "Descriptor", "ErrorCode", "MemoryDescriptor",
           "MooncakeDistributedStore", "MooncakeHostMemAllocator", "ObjectDataType",
           "ReplicaDescriptor", "ReplicaStatus", "ReplicateConfig", "SoftPinAction"]
