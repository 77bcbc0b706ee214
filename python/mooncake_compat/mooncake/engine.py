"""``mooncake.engine`` of kvtier's compatibility package: Mooncake's ``TransferEngine`` by name,
without a transfer engine behind it.

Mooncake's transfer engine moves bytes between the registered memory of two processes (RDMA or
TCP, peer to peer). kvtier has no such engine: its processes exchange KV cache through the store
(``mooncake.store``). The module exists so that code which imports ``TransferEngine`` next to
``mooncake.store`` (LMCache's transfer channels register a factory at import) keeps importing.
Construction works; every call that needs the engine answers the way Mooncake's reports a
failure (``initialize`` non-zero, transfers -1, batch ids 0, ...) and logs one error per engine
saying so. The two calls that touch only local memory (``read_bytes_from_buffer``,
``write_bytes_to_buffer``) work. docs/mooncake-migration.md lists every method's answer;
tests/engines/test_mooncake_engine_surface.py compares the names with the real wheel's."""

import ctypes
import enum
import logging

_log = logging.getLogger(__name__)

_NO_ENGINE = ("kvtier's `mooncake` package has no peer-to-peer transfer engine, so "
              "TransferEngine.%s fails (this engine's later calls fail the same way, without "
              "this message). Share KV cache through the store (mooncake.store, served by "
              "kvtier), or install Mooncake's own wheel (mooncake-transfer-engine) in place of "
              "kvtier-mooncake-compat where peer-to-peer transfers are needed; see "
              "docs/mooncake-migration.md.")

# Mooncake's answers for a failed call (its Python binding's conventions).
_FAILED = -1  # status-returning calls: 0 is success, negative is failure
_NO_BATCH = 0  # batch-id-returning calls: 0 is "not submitted"
_NO_ADDRESS = 0  # address-returning calls: 0 is "none"

# No transport of Mooncake's is built in (the wheel's non-CUDA build answers the same).
SUPPORT_CUDA = False
SUPPORT_EFA = False
SUPPORT_HIP = False
SUPPORT_INTRA_NVLINK = False
SUPPORT_MNNVL = False
SUPPORT_MUSA = False


class TransferOpcode(enum.IntEnum):
    Read = 0
    Write = 1


# Mooncake's module exports the members by name too.
Read = TransferOpcode.Read
Write = TransferOpcode.Write


class TransferNotify:
    """A notification (name, msg) a transfer may carry; kvtier never delivers one."""

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    def __repr__(self):
        return f"TransferNotify(name={self.name!r}, msg={self.msg!r})"


class TransferEngine:
    """Mooncake's TransferEngine by name; see the module's docstring for what it answers."""

    TransferOpcode = TransferOpcode

    def __init__(self):
        self._told = False

    def _fail(self, call, answer):
        if not self._told:
            self._told = True
            _log.error(_NO_ENGINE, call)
        return answer

    # ---- set-up: nothing to start ----
    def initialize(self, local_hostname, metadata_server, protocol, device_name, /):
        return self._fail("initialize", _FAILED)

    def initialize_ext(self, local_hostname, metadata_server, protocol, device_name,
                       metadata_type, /):
        return self._fail("initialize_ext", _FAILED)

    def get_rpc_port(self):
        # No engine listens, so there is no port to give (a made-up one would send peers to
        # nothing).
        return self._fail("get_rpc_port", _FAILED)

    def get_local_topology(self, device_name=None):
        # Mooncake's JSON map of devices to NICs; this engine drives none.
        self._fail("get_local_topology", None)
        return "{}"

    def get_engine(self):
        return None  # no C++ engine object to hand out (Mooncake's answer before initialize)

    def get_engine_ptr(self):
        return 0

    def send_probe(self, peer_server_name):
        return self._fail("send_probe", _FAILED)

    def warmup_efa_segment(self, segment_name):
        return self._fail("warmup_efa_segment", _FAILED)

    # ---- memory registration ----
    def register_memory(self, buffer_addr, capacity, location="*"):
        return self._fail("register_memory", _FAILED)

    def unregister_memory(self, buffer_addr, /):
        return self._fail("unregister_memory", _FAILED)

    def batch_register_memory(self, buffer_addresses, capacities, location="*"):
        return self._fail("batch_register_memory", _FAILED)

    def batch_unregister_memory(self, buffer_addresses, /):
        return self._fail("batch_unregister_memory", _FAILED)

    def allocate_managed_buffer(self, length, /):
        return self._fail("allocate_managed_buffer", _NO_ADDRESS)

    def free_managed_buffer(self, buffer_addr, length, /):
        return self._fail("free_managed_buffer", _FAILED)

    def get_first_buffer_address(self, segment_name, /):
        return self._fail("get_first_buffer_address", _NO_ADDRESS)

    # ---- transfers to and from a peer ----
    def transfer_sync(self, target_hostname, buffer, peer_buffer_address, length, opcode,
                      notify=None, transport_hint=""):
        return self._fail("transfer_sync", _FAILED)

    def transfer_sync_read(self, target_hostname, buffer, peer_buffer_address, length,
                           transport_hint=""):
        return self._fail("transfer_sync_read", _FAILED)

    def transfer_sync_write(self, target_hostname, buffer, peer_buffer_address, length,
                            transport_hint=""):
        return self._fail("transfer_sync_write", _FAILED)

    def transfer_submit_write(self, target_hostname, buffer, peer_buffer_address, length,
                              transport_hint=""):
        return self._fail("transfer_submit_write", _NO_BATCH)

    def batch_transfer_sync(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                            opcode, notify=None, transport_hint=""):
        return self._fail("batch_transfer_sync", _FAILED)

    def batch_transfer_sync_read(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                                 transport_hint=""):
        return self._fail("batch_transfer_sync_read", _FAILED)

    def batch_transfer_sync_write(self, target_hostname, buffers, peer_buffer_addresses,
                                  lengths, transport_hint=""):
        return self._fail("batch_transfer_sync_write", _FAILED)

    def batch_transfer_async(self, target_hostname, buffers, peer_buffer_addresses, lengths,
                             opcode, transport_hint=""):
        return self._fail("batch_transfer_async", _NO_BATCH)

    def batch_transfer_async_read(self, target_hostname, buffers, peer_buffer_addresses,
                                  lengths, transport_hint=""):
        return self._fail("batch_transfer_async_read", _NO_BATCH)

    def batch_transfer_async_write(self, target_hostname, buffers, peer_buffer_addresses,
                                   lengths, transport_hint=""):
        return self._fail("batch_transfer_async_write", _NO_BATCH)

    def transfer_check_status(self, batch_id, /):
        return self._fail("transfer_check_status", _FAILED)  # -1: "the transfer failed"

    def get_batch_transfer_status(self, batch_ids, /):
        return self._fail("get_batch_transfer_status", _FAILED)

    def get_notifies(self):
        return []  # no peer can send one

    # ---- local memory: plain copies, no engine needed ----
    def read_bytes_from_buffer(self, source_address, length, /):
        """``length`` bytes at ``source_address`` of this process."""
        return ctypes.string_at(source_address, length) if length > 0 else b""

    def write_bytes_to_buffer(self, dest_address, src, length, /):
        """Copies the first ``length`` bytes of ``src`` to ``dest_address``; -1 (nothing
        copied) when ``src`` is shorter."""
        data = src.encode() if isinstance(src, str) else bytes(src)
        if length < 0 or length > len(data):
            return _FAILED
        ctypes.memmove(dest_address, data, length)
        return 0


__all__ = ["Read", "SUPPORT_CUDA", "SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_INTRA_NVLINK",
           "SUPPORT_MNNVL", "SUPPORT_MUSA", "TransferEngine", "TransferNotify", "TransferOpcode",
           "Write"]
