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

from kvtier._kvtier import StoreHandle as _StoreHandle
from kvtier._kvtier import parse_byte_size as _parse_byte_size
from kvtier._kvtier import store_error_codes as _store_error_codes

__all__ = ["DistributedStore", "ErrorCode", "MooncakeDistributedStore", "ReplicateConfig",
           "parse_byte_size"]

_log = logging.getLogger("kvtier.store")

ErrorCode = enum.IntEnum(
    "ErrorCode", sorted(_store_error_codes().items(), key=lambda kv: -kv[1]), module=__name__)
ErrorCode.__doc__ = "The store's error codes: Mooncake's names and values (0 is OK)."

_MB = 1 << 20
_DEFAULTS = {  # Mooncake's setup(dict) defaults
    "metadata_server": None,
    "global_segment_size": 16 * _MB,
    "local_buffer_size": 16 * _MB,
    "protocol": "tcp",
    "rdma_devices": "",
    "master_server_addr": "127.0.0.1:50051",
}
_IGNORED_DICT_KEYS = {"ipc_socket_path", "engine"}  # accepted, meaningless here


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


def _split_hostname(text):
    """("host", port) from "host", "host:port" or "[v6]:port"; port 0 when absent."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if not host:
        raise ValueError(f"no host in local_hostname {text!r}")
    if host == "localhost":
        host = "127.0.0.1"  # the node binds here and peers dial it: keep it IPv4 loopback
    if port == "":
        return host, 0
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(f"bad port in local_hostname {text!r}")
    return host, int(port)


class ReplicateConfig:
    """Mooncake's ReplicateConfig, for put/put_from/batch_put_from's optional ``config``.

    ``replica_num`` 0 means the master's --replicas (Mooncake's default is 1; kvtier leaves the
    choice to the master). ``preferred_segment`` (or the first of ``preferred_segments``) is a
    node's "host:port" to place the first replica on. Pins are not supported and are ignored.
    """

    def __init__(self, replica_num=0, preferred_segment="", preferred_segments=None):
        self.replica_num = replica_num
        self.preferred_segment = preferred_segment
        self.preferred_segments = list(preferred_segments or [])
        self.with_soft_pin = False
        self.with_hard_pin = False

    def __repr__(self):
        return (f"ReplicateConfig(replica_num={self.replica_num}, "
                f"preferred_segment={self.preferred_segment!r})")


class DistributedStore(_StoreHandle):
    """A client of the kvtier store with Mooncake's MooncakeDistributedStore API.

    Set it up once, either as a dummy client of the node on this host (``setup_dummy``) or as an
    embedded node of its own (``setup``). The data methods (put, get, get_size, is_exist,
    batch_is_exist, remove, remove_all, alloc_from_mem_pool, register_buffer, unregister_buffer,
    put_from, get_into, batch_put_from, batch_get_into, get_hostname, close) are native; their
    docstrings give the return values. Thread-safe. Usable as a context manager (closes on exit).
    """

    def setup(self, local_hostname, metadata_server=None, global_segment_size=16 * _MB,
              local_buffer_size=16 * _MB, protocol="tcp", rdma_devices="",
              master_server_addr="127.0.0.1:50051", engine=None, enable_ssd_offload=False,
              ssd_offload_path="", tenant_id="default", enable_client_http_server=False,
              client_http_port=9300, auth_token_file=None):
        """Makes this process a store node: it mounts a segment of ``global_segment_size`` bytes.

        ``local_hostname`` is "host" or "host:port": the node's data plane binds there (no port:
        a free one). ``master_server_addr`` is the master's "host:port". ``metadata_server``,
        ``rdma_devices`` and ``engine`` are accepted and ignored. ``protocol`` must be "tcp".
        Sizes are ints or strings ("4GB"). ``auth_token_file`` (a kvtier addition): the store's
        shared secret, the file of the master's ``--auth-token-file`` (docs/security.md). Also
        ``setup(dict)`` with those keys. Returns 0, or a negative ErrorCode (INVALID_PARAMS for bad
        arguments, ILLEGAL_CLIENT when the master refuses the secret; the reason is logged).
        """
        if isinstance(local_hostname, dict):
            return self._setup_from_dict(local_hostname)
        del metadata_server, rdma_devices, engine, ssd_offload_path, client_http_port
        try:
            if str(protocol).lower() != "tcp":
                raise ValueError(f"protocol {protocol!r} is not supported: the kvtier store "
                                 "moves bytes over TCP")
            if enable_ssd_offload:
                raise ValueError("enable_ssd_offload is not supported (use a kvtier server "
                                 "L2 connector for disk tiers)")
            if enable_client_http_server:
                raise ValueError("enable_client_http_server is not supported (run `kvtier node "
                                 "--http-port` for a node with metrics)")
            if tenant_id not in (None, "", "default"):
                raise ValueError(f"tenant_id {tenant_id!r}: tenants are not supported")
            if not isinstance(master_server_addr, str) or "://" in master_server_addr:
                raise ValueError(f"master_server_addr {master_server_addr!r} must be the "
                                 "master's host:port (HA master addresses are not supported)")
            if not isinstance(local_hostname, str):
                raise ValueError("local_hostname must be a str")
            host, port = _split_hostname(local_hostname)
            segment = parse_byte_size(global_segment_size)
            local = parse_byte_size(local_buffer_size)
        except (ValueError, TypeError) as e:
            return self._refuse("setup", e)
        code, message = self._setup_embedded(master_server_addr, host, port, segment, local,
                                             str(auth_token_file or ""))
        return self._report("setup", code, message)

    def setup_dummy(self, mem_pool_size, local_buffer_size, server_address="127.0.0.1:50052"):
        """Attaches to the `kvtier node` at ``server_address`` ("host:port"; the node's --port
        names its Unix socket, so the node must be on this host).

        ``mem_pool_size`` bytes are shared with the node for ``alloc_from_mem_pool``;
        ``local_buffer_size`` bytes are the staging area of put/get. Sizes are ints or strings.
        Returns 0, or a negative ErrorCode (the reason is logged).
        """
        try:
            pool = parse_byte_size(mem_pool_size)
            local = parse_byte_size(local_buffer_size)
            if not isinstance(server_address, str):
                raise ValueError("server_address must be a str 'host:port'")
        except (ValueError, TypeError) as e:
            return self._refuse("setup_dummy", e)
        code, message = self._setup_dummy(pool, local, server_address)
        return self._report("setup_dummy", code, message)

    def _setup_from_dict(self, config):
        if "local_hostname" not in config:
            return self._refuse("setup", ValueError("the config dict needs 'local_hostname'"))
        args = dict(_DEFAULTS)
        extras = {}
        for key, value in config.items():
            if key in args or key == "local_hostname":
                args[key] = value
            elif key in ("tenant_id", "enable_ssd_offload", "ssd_offload_path",
                         "enable_client_http_server", "client_http_port", "auth_token_file"):
                extras[key] = value
            elif key not in _IGNORED_DICT_KEYS:
                _log.warning("setup: ignoring unknown config key %r", key)
        return self.setup(args.pop("local_hostname"), **args, **extras)

    @staticmethod
    def _refuse(what, error):
        _log.error("%s: %s", what, error)
        return int(ErrorCode.INVALID_PARAMS)

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
