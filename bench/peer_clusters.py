"""The server processes of bench/mooncake_peer.py: kvtier's `kvtier master` + `kvtier node`, and
Mooncake's own `mooncake_master` + `mooncake_client` from its wheel, on free loopback ports,
TCP only, Mooncake with P2PHANDSHAKE metadata (no metadata server). Every process is stopped by
its PID (SIGTERM, then SIGKILL); its log is kept for errors. start_mooncake_master and
start_mooncake_client are also the engine tests' launchers of the wheel's processes
(tests/engines/test_mooncake_api_pair.py).

This module imports neither store package: the orchestrator stays free of both native modules.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from child_process import die_with_parent, free_port, stop_process  # noqa: E402
from child_process import tcp_open as port_open  # noqa: E402


class Proc:
    """One server process; stop() is safe to call more than once."""

    def __init__(self, name, argv, port=None):
        self.name, self.port = name, port
        self.log = tempfile.NamedTemporaryFile(prefix=f"peer-{name}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     preexec_fn=die_with_parent)

    @property
    def pid(self):
        return self.proc.pid

    @property
    def address(self):
        """"127.0.0.1:<port>" of the port it serves on (the one start() picked)."""
        return f"127.0.0.1:{self.port}"

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
        stop_process(self.proc)
        self.log.close()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


def start(name, argv_at, ready, attempts=3):
    """A started Proc of argv_at(port) on a free port, ready(proc) true; a port picked here may be
    taken before the process binds it, so a start that fails is retried on a fresh port."""
    for attempt in range(attempts):
        port = free_port()
        p = Proc(name, argv_at(port), port)
        try:
            p.wait_ready(lambda: ready(p))
            return p
        except RuntimeError:
            p.stop()
            if attempt == attempts - 1:
                raise


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


def start_mooncake_master(lease_ms):
    """The wheel's `mooncake_master` (no HTTP metadata server: clients use P2PHANDSHAKE); a
    started Proc, .address its RPC address."""
    return start("mooncake-master", lambda port: [
        mooncake_binary("mooncake_master"), f"--rpc_port={port}", "--rpc_address=127.0.0.1",
        f"--metrics_port={free_port()}", "--metrics_host=127.0.0.1",
        f"--default_kv_lease_ttl={lease_ms}", "--enable_http_metadata_server=false",
        "--logtostderr"], lambda p: port_open(p.port))


def start_mooncake_client(master_address, segment):
    """The wheel's `mooncake_client` (Mooncake's standalone "real client", which dummy clients
    attach to), mounting a segment (bytes, or a size string like "64MB") at the master; a
    started Proc, .address what setup_dummy takes."""
    return start("mooncake-client", lambda port: [
        mooncake_binary("mooncake_client"), "--host=127.0.0.1", f"--port={port}",
        f"--global_segment_size={segment}", f"--master_server_address={master_address}",
        "--metadata_server=P2PHANDSHAKE", "--protocol=tcp", "--logtostderr"],
        lambda p: "Starting real client service" in p.log_text() and port_open(p.port))


class Cluster:
    """A started master and, when asked, the process dummies attach to (`server`). Attributes:
    master_address, server_address ("host:port" setup_dummy takes), server_pid."""

    def __init__(self):
        self.procs = []
        self.master_address = self.server_address = None
        self.server_pid = None

    def add(self, proc):
        self.procs.append(proc)
        return proc

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
        master = c.add(start("kvtier-master", lambda port: [
            kvtier_binary(), "master", "--host", "127.0.0.1", "--port", str(port),
            "--http-port", "0", "--default-kv-lease-ttl-ms", str(lease_ms)],
            lambda p: port_open(p.port)))
        c.master_address = master.address
        if with_server:
            node = c.add(start("kvtier-node", lambda port: [
                kvtier_binary(), "node", "--master", c.master_address, "--host", "127.0.0.1",
                "--port", str(port), "--global-segment-size", str(segment_bytes),
                "--http-port", "0"],
                lambda p: "kvtier node " in p.log_text()))
            c.server_address, c.server_pid = node.address, node.pid
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
        c.master_address = c.add(start_mooncake_master(lease_ms)).address
        if with_server:
            client = c.add(start_mooncake_client(c.master_address, segment_bytes))
            c.server_address, c.server_pid = client.address, client.pid
    except BaseException:
        c.stop()
        raise
    return c
