"""``mooncake.store`` on kvtier: the names Mooncake's store module exports, from kvtier.store."""

from kvtier.store import (  # noqa: F401 (re-exports)
    BufferHandle,
    ErrorCode,
    MooncakeDistributedStore,
    MooncakeHostMemAllocator,
    ObjectDataType,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
)

__all__ = ["BufferHandle", "ErrorCode", "MooncakeDistributedStore", "MooncakeHostMemAllocator",
           "ObjectDataType", "ReplicaStatus", "ReplicateConfig", "SoftPinAction"]
