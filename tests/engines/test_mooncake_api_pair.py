"""Helpers of the differential tests (no tests of its own; named test_mooncake_api_* to sit with
them). Mooncake's own `mooncake_master` (from the installed wheel) beside a real kvtier master and
node, and one embedded store client of each, for the differential tests: the same call with the
same arguments goes to both, and the results are compared in a normalised form."""

import ctypes
import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import mooncake.store as wheel
from kvtier.server import free_port
from kvtier.store import MooncakeDistributedStore as KvtierStore


def wheel_master_binary():
    """The wheel's `mooncake_master` binary (its console script execs this file)."""
    path = Path(wheel.__file__).resolve().parent / "mooncake_master"
    if not path.exists():
        raise FileNotFoundError(f"the Mooncake wheel has no {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return str(path)


class WheelMaster:
    """`mooncake_master` on free loopback ports; stopped by PID."""

    def __init__(self, lease_ms):
        self.log = tempfile.NamedTemporaryFile(prefix="mooncake-master-", suffix=".log",
                                               delete=False)
        for attempt in range(3):
            self.port = free_port()
            self.metrics_port = free_port()
            self.proc = subprocess.Popen(
                [wheel_master_binary(), f"--rpc_port={self.port}", "--rpc_address=127.0.0.1",
                 f"--metrics_port={self.metrics_port}", f"--default_kv_lease_ttl={lease_ms}",
                 "--enable_http_metadata_server=false"],
                stdout=self.log, stderr=subprocess.STDOUT)
            if self._wait():
                return
            self.stop()
            if attempt == 2:
                raise RuntimeError(f"mooncake_master did not start:\n{self.log_text()}")

    def _wait(self, timeout_s=20.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.3).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


class WheelClient(WheelMaster):
    """The wheel's `mooncake_client` (Mooncake's "real client", which dummy clients attach to)
    on a free loopback port, mounting a segment at `master`; stopped by PID."""

    def __init__(self, master, segment="64MB"):  # noqa: super().__init__ starts a master
        self.log = tempfile.NamedTemporaryFile(prefix="mooncake-client-", suffix=".log",
                                               delete=False)
        binary = str(Path(wheel_master_binary()).with_name("mooncake_client"))
        for attempt in range(3):
            self.port = free_port()
            self.proc = subprocess.Popen(
                [binary, "--host=127.0.0.1", f"--port={self.port}",
                 f"--master_server_address={master.address}",
                 f"--global_segment_size={segment}", "--protocol=tcp",
                 "--metadata_server=P2PHANDSHAKE"],
                stdout=self.log, stderr=subprocess.STDOUT)
            if self._wait():
                return
            self.stop()
            if attempt == 2:
                raise RuntimeError(f"mooncake_client did not start:\n{self.log_text()}")


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
