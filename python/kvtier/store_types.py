"""The value types of Mooncake's store API that kvtier.store accepts: ReplicateConfig and the
enums beside it (names and members as Mooncake's ``mooncake.store`` exports them)."""

import enum


class SoftPinAction(enum.IntEnum):
    """What a put does to the object's soft pin (Mooncake's names and values)."""
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


class TaskStatus(enum.IntEnum):
    """The state of a replica copy or move task (Mooncake's values)."""
    PENDING = 0
    PROCESSING = 1
    FAILED = 2
    SUCCESS = 3


class TaskType(enum.IntEnum):
    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class QueryTaskResponse:
    """Mooncake's answer to query_task. kvtier has no copy or move tasks (query_task returns
    UNAVAILABLE_IN_CURRENT_MODE), so this only carries Mooncake's defaults."""

    def __init__(self):
        self.id = (0, 0)
        self.type = TaskType.REPLICA_COPY
        self.status = TaskStatus.PENDING
        self.created_at_ms_epoch = 0
        self.last_updated_at_ms_epoch = 0
        self.assigned_client = (0, 0)
        self.message = ""

    def __repr__(self):
        return (f"QueryTaskResponse(id={self.id[0]}-{self.id[1]}, type={int(self.type)}, "
                f"status={int(self.status)}, message={self.message!r})")


def _as_count(value):
    if isinstance(value, float) or not hasattr(value, "__index__") or value.__index__() < 0:
        raise TypeError(f"expected a non-negative int, not {value!r}")
    return value.__index__()


def _as_optional_count(value):
    return None if value is None else _as_count(value)


def _as_flag(value):
    # As pybind's bool: True/False, None (False), or a number (its truth); a str is refused.
    if value is None or isinstance(value, (bool, int)):
        return bool(value)
    raise TypeError(f"expected a bool, not {type(value).__name__}")


def _as_str(value):
    if not isinstance(value, str):
        raise TypeError(f"expected a str, not {type(value).__name__}")
    return value


def _as_str_list(value):
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not all(
            isinstance(v, str) for v in value):
        raise TypeError(f"expected a list of str, not {value!r}")
    return list(value)


def _as_optional_str_list(value):
    return None if value is None else _as_str_list(value)


def _as_member(enum_type):
    def check(value):
        if not isinstance(value, enum_type):
            raise TypeError(f"expected a {enum_type.__name__}, not {value!r}")
        return value
    return check


class _Field:
    """A typed ReplicateConfig field: a wrong type raises TypeError on assignment, as the
    fields of Mooncake's (pybind) ReplicateConfig do, instead of failing later in a put."""

    def __init__(self, check, default):
        self.check, self.default = check, default

    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = getattr(obj, self.name, self.default)
        return list(value) if isinstance(value, list) else value

    def __set__(self, obj, value):
        setattr(obj, self.name, self.check(value))


class ReplicateConfig:
    """Mooncake's ReplicateConfig, for the ``config`` of the put calls.

    Honoured here: ``replica_num`` (copies on distinct nodes; 0 means the master's --replicas),
    ``preferred_segment`` / the first of ``preferred_segments`` (a node's "host:port" for the
    first copy), ``with_hard_pin`` (never evicted) and ``soft_pin_action=ENABLE`` /
    ``with_soft_pin`` (evicted only after every unpinned object, for ``soft_pin_ttl_ms`` after
    the put and after each read; None: the master's --default-kv-soft-pin-ttl-ms). Accepted with
    Mooncake's defaults and not acted on (docs/store/python.md): ``prefer_alloc_in_same_node``,
    NVMe-oF and DFS replicas, ``data_type``, ``group_ids``. Fields have Mooncake's types
    (counts are non-negative ints, ``soft_pin_action`` a SoftPinAction, ``data_type`` an
    ObjectDataType, segments strs): another type raises TypeError when assigned.
    """

    replica_num = _Field(_as_count, 1)
    nof_replica_num = _Field(_as_count, 0)
    dfs_replica_num = _Field(_as_count, 0)
    soft_pin_action = _Field(_as_member(SoftPinAction), SoftPinAction.PRESERVE)
    soft_pin_ttl_ms = _Field(_as_optional_count, None)
    with_soft_pin = _Field(_as_flag, False)  # older Mooncake's spelling of soft_pin_action
    with_hard_pin = _Field(_as_flag, False)
    preferred_segments = _Field(_as_str_list, [])
    preferred_nof_segments = _Field(_as_str_list, [])
    preferred_segment = _Field(_as_str, "")
    prefer_alloc_in_same_node = _Field(_as_flag, False)
    data_type = _Field(_as_member(ObjectDataType), ObjectDataType.UNKNOWN)
    group_ids = _Field(_as_optional_str_list, None)

    def __init__(self, **fields):
        """Mooncake's defaults; keywords (a kvtier convenience) set fields by name."""
        for name, value in fields.items():
            if not isinstance(getattr(type(self), name, None), _Field):
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


class DiskDescriptor:
    """Mooncake's descriptor of a disk replica. kvtier keeps no disk replicas, so
    get_disk_descriptor never returns one; the type is here for callers that name it."""

    def __init__(self, file_path="", object_size=0):
        self.file_path = file_path
        self.object_size = object_size


class MemoryDescriptor:
    def __init__(self, buffer_descriptor=None):
        self.buffer_descriptor = Descriptor() if buffer_descriptor is None else buffer_descriptor


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
