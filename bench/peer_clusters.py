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
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "python"))
from child_process import free_port, start_on_free_ports  # noqa: E402
from child_process import tcp_open as port_open  # noqa: E402


def start(name, argv_at, ready, timeout_s=30.0):
    """A started process (child_process.Child) of argv_at(port) on a free port, ready(proc) true;
    a start that fails is retried on fresh ports. .port is its port, .address "127.0.0.1:<port>"."""
    def ready_at(child, port):
        child.port, child.address = port, f"127.0.0.1:{port}"
        return ready(child)
    return start_on_free_ports(name, argv_at, ready_at, timeout_s)


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
            p.remove_log()
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
