"""The value types of Mooncake's store API that kvtier.store accepts: ReplicateConfig and the
enums beside it (names and members as Mooncake's ``mooncake.store`` exports them)."""

import enum


class SoftPinAction(enum.IntEnum):
    """What a put does to the object's soft pin (Mooncake's values are not published; these
    are the members' order)."""
    PRESERVE = 0
    ENABLE = 1
    DISABLE = 2


class ReplicaStatus(enum.IntEnum):
    UNDEFINED = 0
    INITIALIZED = 1
    PROCESSING = 2
    COMPLETE = 3
    REMOVED = 4
    FAILED = 5


class ObjectDataType(enum.IntEnum):
    UNKNOWN = 0
    KVCACHE = 1
    TENSOR = 2
    WEIGHT = 3
    SAMPLE = 4
    ACTIVATION = 5
    GRADIENT = 6
    OPTIMIZER_STATE = 7
    METADATA = 8
    GENERAL = 9


class ReplicateConfig:
    """Mooncake's ReplicateConfig, for the ``config`` of the put calls.

    Honoured here: ``replica_num`` (copies on distinct nodes; 0 means the master's --replicas),
    ``preferred_segment`` / the first of ``preferred_segments`` (a node's "host:port" for the
    first copy), ``with_hard_pin`` (never evicted) and ``soft_pin_action=ENABLE`` /
    ``with_soft_pin`` (evicted only after every unpinned object, for ``soft_pin_ttl_ms`` after
    the put and after each read; None: the master's --default-kv-soft-pin-ttl-ms). Accepted with
    Mooncake's defaults and not acted on (docs/store/python.md): ``prefer_alloc_in_same_node``,
    NVMe-oF and DFS replicas, ``data_type``, ``group_ids``.
    """

    def __init__(self, **fields):
        """Mooncake's defaults; keywords (a kvtier convenience) set fields by name."""
        self.replica_num = 1
        self.nof_replica_num = 0
        self.dfs_replica_num = 0
        self.soft_pin_action = SoftPinAction.PRESERVE
        self.soft_pin_ttl_ms = None
        self.with_soft_pin = False  # older Mooncake's spelling of soft_pin_action=ENABLE
        self.with_hard_pin = False
        self.preferred_segments = []
        self.preferred_nof_segments = []
        self.preferred_segment = ""
        self.prefer_alloc_in_same_node = False
        self.data_type = ObjectDataType.UNKNOWN
        self.group_ids = None
        for name, value in fields.items():
            if not hasattr(self, name):
                raise TypeError(f"ReplicateConfig has no field {name!r}")
            setattr(self, name, value)

    def __repr__(self):
        return (f"ReplicateConfig(replica_num={self.replica_num}, "
                f"preferred_segment={self.preferred_segment!r}, "
                f"preferred_segments={self.preferred_segments!r})")

    __str__ = __repr__


class Descriptor:
    """Mooncake's buffer descriptor of a memory replica. kvtier does not export replica
    locations yet: ``size`` and ``buffer_address`` are 0 and ``transport_endpoint`` ""."""

    def __init__(self, size=0, buffer_address=0, transport_endpoint=""):
        self.size = size
        self.buffer_address = buffer_address
        self.transport_endpoint = transport_endpoint

    def __repr__(self):
        return (f"<Descriptor size={self.size} buffer_address={self.buffer_address} "
                f"transport_endpoint={self.transport_endpoint}>")


class MemoryDescriptor:
    def __init__(self, buffer_descriptor):
        self.buffer_descriptor = buffer_descriptor


class ReplicaDescriptor:
    """One replica of an object. Every replica of the kvtier store is in memory and, once a
    reader can see it, COMPLETE."""

    def __init__(self):
        self.status = ReplicaStatus.COMPLETE
        self._memory = MemoryDescriptor(Descriptor())

    def is_memory_replica(self):
        return True

    def is_disk_replica(self):
        return False

    def is_local_disk_replica(self):
        return False

    def is_nof_replica(self):
        return False

    def get_memory_descriptor(self):
        return self._memory

    def get_disk_descriptor(self):
        raise RuntimeError("Expected DiskDescriptor: kvtier replicas are in memory")

    def __repr__(self):
        return f"<ReplicaDescriptor status={self.status.name} memory>"
