"""kvtier.store: the kvtier store behind Mooncake Store's Python API.

``DistributedStore`` (also exported as ``MooncakeDistributedStore``) has the method names,
argument orders and return conventions of Mooncake's ``MooncakeDistributedStore``, so a caller
written for Mooncake switches by changing its import::

    from kvtier.store import MooncakeDistributedStore

    store = MooncakeDistributedStore()
    # Attach to the `kvtier node` on this host (its --port names its Unix socket) ...
    assert store.setup_dummy(1 << 30, 16 << 20, "127.0.0.1:50052") == 0
    # ... or become a node yourself, contributing a segment:
    # store.setup("127.0.0.1", "P2PHANDSHAKE", "4GB", "16MB", "tcp", "", "127.0.0.1:50051")
    assert store.put("k", b"v") == 0
    assert store.get("k") == b"v"
    store.close()

Every call returns an int: 0 (or a byte count) on success, a negative ``ErrorCode`` on failure;
``get`` returns ``b""`` on any failure. Before ``setup``/``setup_dummy`` and after ``close``
every call returns ``ErrorCode.RPC_FAIL`` (-900). Wrong argument *types* raise ``TypeError``.
Calls release the GIL while they wait on the node or the master. See docs/store/python.md.
"""

import enum
import logging

from kvtier._kvtier import BufferHandle, MooncakeHostMemAllocator  # noqa: F401 (re-exports)
from kvtier._kvtier import StoreHandle as _StoreHandle
from kvtier._kvtier import parse_byte_size as _parse_byte_size
from kvtier._kvtier import store_error_codes as _store_error_codes
from kvtier.store_parallel_spec import ParallelAxis, ReadTarget, TensorParallelism  # noqa: F401
from kvtier.store_parallelism import ParallelismCalls as _ParallelismCalls
from kvtier.store_ranges import RangeCalls as _RangeCalls
from kvtier.store_tensors import TensorCalls as _TensorCalls
from kvtier.store_tensors import _first_error
from kvtier.store_types import (  # noqa: F401 (re-exports)
    Descriptor,
    DiskDescriptor,
    MemoryDescriptor,
    ObjectDataType,
    QueryTaskResponse,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
    TaskStatus,
    TaskType,
)

__all__ = ["BufferHandle", "Descriptor", "DiskDescriptor", "DistributedStore", "ErrorCode",
           "MemoryDescriptor", "MooncakeDistributedStore", "MooncakeHostMemAllocator",
           "ObjectDataType", "ParallelAxis", "QueryTaskResponse", "ReadTarget",
           "ReplicaDescriptor", "ReplicaStatus", "ReplicateConfig", "SoftPinAction",
           "TaskStatus", "TaskType", "TensorParallelism", "parse_byte_size"]

_log = logging.getLogger("kvtier.store")
_warned = set()


def _warn_once(message):
    if message not in _warned:
        _warned.add(message)
        _log.warning("%s", message)

ErrorCode = enum.IntEnum(
    "ErrorCode", sorted(_store_error_codes().items(), key=lambda kv: -kv[1]), module=__name__)
ErrorCode.__doc__ = "The store's error codes: Mooncake's names and values (0 is OK)."

_MB = 1 << 20


def parse_byte_size(value):
    """Bytes in ``value``: a non-negative int, or a string such as "4GB", "512MiB", "1.5G".

    Units K/M/G/T (with or without "B"/"iB") are powers of 1024, as in Mooncake's "4gb".
    Raises ValueError (or TypeError for other types).
    """
    if isinstance(value, bool):
        raise TypeError("a size must be an int or a string, not bool")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"a size must not be negative: {value}")
        return value
    if isinstance(value, (str, bytes)):
        return _parse_byte_size(value.decode() if isinstance(value, bytes) else value)
    raise TypeError(f"a size must be an int or a string, not {type(value).__name__}")


class DistributedStore(_ParallelismCalls, _TensorCalls, _RangeCalls, _StoreHandle):
    """A client of the kvtier store with Mooncake's MooncakeDistributedStore API.

    Set it up once, either as a dummy client of the node on this host (``setup_dummy``) or as an
    embedded node of its own (``setup``). The data methods (put, get, get_size, is_exist,
    batch_is_exist, alloc_from_mem_pool, register_buffer, unregister_buffer, put_from, get_into,
    batch_put_from, batch_get_into, batch_get_buffer, batch_put_from_multi_buffers,
    get_hostname, remove, batch_remove, remove_all, remove_by_regex, close) are native; the rest
    below, the tensor calls (store_tensors.py) and the ranged and session calls
    (store_ranges.py) and the parallelism calls (store_parallelism.py) are composed of them. Every docstring gives
    the return values; docs/store/python.md has one row per Mooncake method with its status.
    Thread-safe. Usable as a context manager (closes on exit).
    """

    def setup(self, local_hostname, metadata_server=None, global_segment_size=16 * _MB,
              local_buffer_size=16 * _MB, protocol="tcp", rdma_devices="",
              master_server_addr="127.0.0.1:50051", engine=None, enable_ssd_offload=False,
              ssd_offload_path="", tenant_id="default", enable_client_http_server=False,
              client_http_port=9300, auth_token_file=None):
        """Makes this process a store node: it mounts a segment of ``global_segment_size`` bytes.

        ``local_hostname`` is "host" or "host:port": the node's data plane binds there (no port:
        a free one). ``master_server_addr`` is the master's "host:port", or, for masters that fail
        over, "etcd://HOST:PORT[;HOST:PORT][/CLUSTER_ID]" (docs/store/failover.md).
        ``metadata_server``, ``rdma_devices``, ``engine``, ``ssd_offload_path`` and
        ``client_http_port`` are accepted and ignored; ``enable_client_http_server=True`` and any
        ``protocol`` but "tcp" (vLLM's default "rdma", which runs over TCP) are ignored with one
        warning; ``tenant_id`` other than "default" and ``enable_ssd_offload=True`` are refused.
        Sizes are ints or strings ("4GB"). ``auth_token_file`` (a kvtier addition): the store's
        shared secret, the file of the master's ``--auth-token-file`` (docs/security.md).

        Also ``setup(dict)`` with those keys (``master_server_address`` is another spelling of
        ``master_server_addr``; a None value is the default; an unknown key is ignored with a
        warning; with ``server_address`` the dict sets up a dummy client, as ``setup_dummy``).
        Both forms are parsed by the store's one setup parser, in C++, which the cache server's
        ``store`` connector uses too. Returns 0, or a negative ErrorCode (INVALID_PARAMS for bad
        arguments, ILLEGAL_CLIENT when the master refuses the secret; the reason is logged).
        """
        # One dict (the keyword form: the arguments by name), parsed in C++ by the store's one
        # setup parser (store_client_factory.h), which the cache server's `store` connector uses.
        config = dict(locals())
        del config["self"]
        if isinstance(local_hostname, dict):
            config = local_hostname
        return self._setup_config("setup", config, require_local_hostname=True)

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address="127.0.0.1:50052"):
        """Attaches to the `kvtier node` at ``server_address`` ("host:port"; the node's --port
        names its Unix socket, so the node must be on this host).

        ``mem_pool_size`` bytes are shared with the node for ``alloc_from_mem_pool``;
        ``local_buffer_size`` bytes are the staging area of put/get. Sizes are ints or strings.
        Returns 0, or a negative ErrorCode (the reason is logged).
        """
        config = {"mem_pool_size": mem_pool_size, "local_buffer_size": local_buffer_size,
                  "server_address": server_address}
        return self._setup_config("setup_dummy", config, require_server_address=True)

    def _setup_config(self, what, config, require_local_hostname=False,
                      require_server_address=False):
        code, message, notes = self._setup_from_config(config, require_local_hostname,
                                                       require_server_address)
        for note in notes:
            _warn_once(f"{what}: {note}")
        return self._report(what, code, message)

    # ---- Mooncake calls built on the native ones (see docs/store/python.md for each) ----

    def put_batch(self, keys, values, config=None):
        """put of each (key, value); 0 when every one succeeded, else the first error."""
        if len(keys) != len(values):
            return int(ErrorCode.INVALID_PARAMS)
        return _first_error(self.put(k, v, config) for k, v in zip(keys, values))

    def get_batch(self, keys):
        """get of each key: a list of bytes, b"" where missing or failed."""
        return [self.get(k) for k in keys]

    def put_parts(self, key, *parts, config=None):
        """Stores the parts (bytes-like, 1-D) concatenated as one value. 0 or a negative code."""
        try:
            value = b"".join(memoryview(p).cast("B") for p in parts)
        except (TypeError, ValueError) as e:
            raise TypeError(f"parts must be 1-D bytes-like objects: {e}") from None
        return self.put(key, value, config)

    def get_buffer(self, key):
        """The value in a BufferHandle (ptr(), size(), buffer protocol), or None."""
        return self.batch_get_buffer([key])[0]

    def batch_get_into_multi_buffers(self, keys, all_buffer_ptrs, all_sizes,
                                     prefer_alloc_in_same_node=False):
        """Scatters each key's value over its buffers in order: bytes read per key, or a
        negative ErrorCode (BUFFER_OVERFLOW when the value is larger than its buffers)."""
        del prefer_alloc_in_same_node  # placement hint of Mooncake's; nothing to choose here
        return self._batch_get_into_multi_buffers(keys, all_buffer_ptrs, all_sizes)

    def upsert(self, key, value, config=None):
        """Inserts or replaces: a forced remove (if present), then put. Not atomic: a reader in
        between sees a miss, never a mix of old and new bytes; one already reading the old value
        reads it whole. 0 or a negative ErrorCode."""
        return self._replace(key, lambda: self.put(key, value, config))

    def upsert_from(self, key, buffer_ptr, size, config=None):
        """upsert from registered memory (see put_from)."""
        return self._replace(key, lambda: self.put_from(key, buffer_ptr, size, config))

    def upsert_parts(self, key, *parts, config=None):
        """upsert of the parts concatenated (see put_parts)."""
        return self._replace(key, lambda: self.put_parts(key, *parts, config=config))

    def upsert_batch(self, keys, values, config=None):
        """upsert of each (key, value); 0, or the first error."""
        if len(keys) != len(values):
            return int(ErrorCode.INVALID_PARAMS)
        return _first_error(self.upsert(k, v, config) for k, v in zip(keys, values))

    def batch_upsert_from(self, keys, buffer_ptrs, sizes, config=None):
        """upsert_from of each key: a list of 0 / negative ErrorCode."""
        if not len(keys) == len(buffer_ptrs) == len(sizes):
            return [int(ErrorCode.INVALID_PARAMS)] * len(keys)
        return [self.upsert_from(k, p, n, config) for k, p, n in zip(keys, buffer_ptrs, sizes)]

    def health_check(self):
        """0 healthy, 1 not set up (or closed), 2 the node or master does not answer."""
        if not self.is_set_up:
            return 1
        return 0 if self.is_exist("kvtier-health-check") >= 0 else 2

    def init_all(self, protocol, device_name, mount_segment_size):
        """Mooncake's RDMA/device initialisation: UNAVAILABLE_IN_CURRENT_MODE (use setup)."""
        return self._unavailable("init_all", "a device transfer engine; use setup()")

    def get_replica_desc(self, key):
        """The key's replicas: one memory ReplicaDescriptor (COMPLETE) when it exists, [] when
        not. Asks no lease. The replica count and locations are not exported yet: one
        descriptor stands for all of them, its location fields empty."""
        return self.batch_get_replica_desc([key]).get(key, [])

    def batch_get_replica_desc(self, keys):
        """{key: get_replica_desc(key)} for each key (in one exists call)."""
        return {k: [ReplicaDescriptor()] if code == 1 else []
                for k, code in zip(keys, self.batch_is_exist(keys))}

    def batch_replica_clear(self, keys, segment_name=""):
        """Removes the keys whose lease has ended (leased and missing ones are skipped) and
        returns the list of keys cleared. Clearing only the replicas on one segment
        (``segment_name``) is not supported: [] with a warning."""
        if segment_name:
            _warn_once("batch_replica_clear(segment_name=...) is not supported: kvtier clears "
                       "an object with all its replicas (pass segment_name='')")
            return []
        keys = list(keys)
        return [k for k, code in zip(keys, self.batch_remove(keys)) if code == 0] if keys else []

    def create_copy_task(self, key, targets):
        """UNAVAILABLE_IN_CURRENT_MODE, as ``((0, 0), code)``: replicas are placed at put."""
        return (0, 0), self._unavailable("create_copy_task", "replica copy tasks")

    def create_move_task(self, key, source, target):
        """UNAVAILABLE_IN_CURRENT_MODE, as ``((0, 0), code)``: replicas are placed at put."""
        return (0, 0), self._unavailable("create_move_task", "replica move tasks")

    def query_task(self, task_id):
        """UNAVAILABLE_IN_CURRENT_MODE, as ``(None, code)``."""
        return None, self._unavailable("query_task", "replica copy and move tasks")

    def get_tensor_into_cuda(self, key, tensor):
        """UNAVAILABLE_IN_CURRENT_MODE: no GPU path in the store yet."""
        return self._unavailable("get_tensor_into_cuda", "a GPU data path")

    def batch_get_tensor_into_cuda(self, keys, tensors_list):
        """UNAVAILABLE_IN_CURRENT_MODE: no GPU path in the store yet."""
        return [self._unavailable("batch_get_tensor_into_cuda", "a GPU data path")] * len(keys)

    def mount_segment(self, path, size, offset=0, protocol="tcp", location=""):
        """UNAVAILABLE_IN_CURRENT_MODE: disk / device segments are not supported."""
        return {"ret": self._unavailable("mount_segment", "disk or device segments"),
                "segment_ids": []}

    def allocate_and_mount_segment(self, size, protocol="tcp", location=""):
        """UNAVAILABLE_IN_CURRENT_MODE: a node's segment is its --global-segment-size."""
        return {"ret": self._unavailable("allocate_and_mount_segment", "extra segments"),
                "segment_ids": []}

    def unmount_segment(self, segment_ids, grace_period_seconds=0):
        """UNAVAILABLE_IN_CURRENT_MODE: segments are unmounted when their node stops."""
        return self._unavailable("unmount_segment", "extra segments")

    def unmount_and_free_segment(self, segment_ids, grace_period_seconds=0):
        """UNAVAILABLE_IN_CURRENT_MODE: segments are unmounted when their node stops."""
        return self._unavailable("unmount_and_free_segment", "extra segments")

    def unmount_local_disk_segment(self, grace_period_seconds=0):
        """UNAVAILABLE_IN_CURRENT_MODE: kvtier has no disk segments."""
        return self._unavailable("unmount_local_disk_segment", "disk segments")

    def get_offload_rpc_read_count(self):
        """0: kvtier has no SSD-offload reads."""
        return 0

    def _replace(self, key, put):
        # force: a reader's lease does not block the replace; the master keeps the old bytes'
        # space out of use until that lease ends, so the reader still sees them whole.
        code = self.remove(key, force=True)
        if code not in (0, int(ErrorCode.OBJECT_NOT_FOUND)):
            return code
        return put()

    @staticmethod
    def _unavailable(what, needs):
        _warn_once(f"{what} is not available in kvtier: it needs {needs}")
        return int(ErrorCode.UNAVAILABLE_IN_CURRENT_MODE)

    @staticmethod
    def _report(what, code, message):
        if code != 0:
            _log.error("%s failed: %s", what, message)
        return code

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = f"node {self.get_hostname()}" if self.is_set_up else "not set up"
        return f"<{type(self).__name__} ({state})>"


MooncakeDistributedStore = DistributedStore
