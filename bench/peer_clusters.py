"""The server processes of bench/mooncake_peer.py: kvtier's `kvtier master` + `kvtier node`, and
Mooncake's own `mooncake_master` + `mooncake_client` from its wheel, on free loopback ports,
TCP only, Mooncake with P2PHANDSHAKE metadata (no metadata server). Every process is stopped by
its PID (SIGTERM, then SIGKILL); its log is kept for errors.

This module imports neither store package: the orchestrator stays free of both native modules.
"""

import ctypes
import importlib.util
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    # A bench killed mid-run must not leave servers holding ports and gigabytes.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def free_port():
    """A loopback port nobody listens on, below the ephemeral range (a port bind(0) picks could
    be taken as a client's local port before the server binds it)."""
    for _ in range(200):
        port = random.randint(12000, 30000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue
    raise RuntimeError("no free loopback port found")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


class Proc:
    """One server process; stop() is safe to call more than once."""

    def __init__(self, name, argv):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix=f"peer-{name}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     preexec_fn=_die_with_parent)

    @property
    def pid(self):
        return self.proc.pid

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def wait_ready(self, ready, timeout_s=30.0):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n"
                                   f"{self.log_text()[-4000:]}")
            if ready():
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} not ready after {timeout_s} s:\n{self.log_text()[-4000:]}")

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


def kvtier_binary():
    path = os.environ.get("KVTIER_BIN") or str(Path(__file__).resolve().parents[1] / "build/kvtier")
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"kvtier binary not found at {path}: build it or set KVTIER_BIN")
    return path


def mooncake_binary(name):
    """mooncake_master / mooncake_client as the wheel ships them (its console scripts exec
    these)."""
    spec = importlib.util.find_spec("mooncake")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the `mooncake` package (mooncake-transfer-engine-non-cuda) is not "
                           "importable from this Python")
    path = Path(list(spec.submodule_search_locations)[0]) / name
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{path}: the wheel ships no executable {name}")
    return str(path)


class Cluster:
    """A started master and, when asked, the process dummies attach to (`server`). Attributes:
    master_address, server_address ("host:port" setup_dummy takes), server_pid."""

    def __init__(self):
        self.procs = []
        self.master_address = self.server_address = None
        self.server_pid = None

    def _start(self, name, argv, ready):
        p = Proc(name, argv)
        self.procs.append(p)
        p.wait_ready(lambda: ready(p))
        return p

    def stop(self):
        for p in reversed(self.procs):
            p.stop()
        self.procs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def kvtier_cluster(lease_ms, segment_bytes, with_server):
    """`kvtier master` and, with_server, a `kvtier node` with a segment of segment_bytes (prefaulted
    at start, the node's default)."""
    c = Cluster()
    try:
        mport = free_port()
        c._start("kvtier-master", [kvtier_binary(), "master", "--host", "127.0.0.1", "--port",
                                   str(mport), "--http-port", "0",
                                   "--default-kv-lease-ttl-ms", str(lease_ms)],
                 lambda p: port_open(mport))
        c.master_address = f"127.0.0.1:{mport}"
        if with_server:
            nport = free_port()
            node = c._start("kvtier-node", [kvtier_binary(), "node", "--master", c.master_address,
                                            "--host", "127.0.0.1", "--port", str(nport),
                                            "--global-segment-size", str(segment_bytes),
                                            "--http-port", "0"],
                            lambda p: "kvtier node " in p.log_text())
            c.server_address, c.server_pid = f"127.0.0.1:{nport}", node.pid
    except BaseException:
        c.stop()
        raise
    return c


def mooncake_cluster(lease_ms, segment_bytes, with_server):
    """Mooncake's `mooncake_master` and, with_server, its standalone real client `mooncake_client`
    (the process Mooncake's dummy clients attach to) with a segment of segment_bytes; TCP,
    P2PHANDSHAKE metadata."""
    c = Cluster()
    try:
        mport, metrics = free_port(), free_port()
        c._start("mooncake-master", [mooncake_binary("mooncake_master"), f"--rpc_port={mport}",
                                     "--rpc_address=127.0.0.1", f"--metrics_port={metrics}",
                                     "--metrics_host=127.0.0.1",
                                     f"--default_kv_lease_ttl={lease_ms}", "--logtostderr"],
                 lambda p: port_open(mport))
        c.master_address = f"127.0.0.1:{mport}"
        if with_server:
            cport = free_port()
            client = c._start("mooncake-client", [
                mooncake_binary("mooncake_client"), "--host=127.0.0.1", f"--port={cport}",
                f"--global_segment_size={segment_bytes}",
                f"--master_server_address={c.master_address}",
                "--metadata_server=P2PHANDSHAKE", "--protocol=tcp", "--logtostderr"],
                lambda p: "Starting real client service" in p.log_text() and port_open(cport))
            c.server_address, c.server_pid = f"127.0.0.1:{cport}", client.pid
    except BaseException:
        c.stop()
        raise
    return c
