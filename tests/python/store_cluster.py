"""A real kvtier store for the Python tests: `kvtier master` and `kvtier node` subprocesses on
free loopback ports, always stopped by PID (SIGTERM, then SIGKILL), logs kept for failures."""

import contextlib
import os
import subprocess
import tempfile
import time

from child_process import die_with_parent, stop_process
from child_process import tcp_open as _tcp_open  # noqa: F401 (its old name, imported by others)
from kvtier.server import find_binary, free_port  # noqa: F401 (re-exported)
from kvtier.store import DistributedStore


class _Process:
    """One kvtier subcommand; `stop()` is safe to call any number of times."""

    def __init__(self, name, args):
        self.name = name
        self.log = tempfile.NamedTemporaryFile(prefix=f"kvtier-{name}-", suffix=".log",
                                               delete=False)
        self.proc = subprocess.Popen([find_binary()] + args, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=die_with_parent)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def log_text(self):
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def stop(self, timeout_s=10.0):
        stop_process(self.proc, timeout_s)
        self.log.close()

    def remove_log(self):
        try:
            os.unlink(self.log.name)
        except OSError:
            pass


def _wait_for(what, proc, ready, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{what} exited with {proc.proc.returncode}:\n{proc.log_text()}")
        if ready():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} not ready after {timeout_s} s:\n{proc.log_text()}")


class StoreCluster:
    """A master and one node (64 MB segment). Attributes: master_port, node_port, node_address
    ("127.0.0.1:<node_port>", what setup_dummy takes), master_address, lease_ms; with http=True
    also master_http_port and node_http_port (/status, /metrics, /dashboard/)."""

    def __init__(self, lease_ms=500, segment="64MB", start_timeout_s=20.0, master_args=(),
                 http=False):
        self.lease_ms = lease_ms
        self.segment = segment
        self.master_args = list(master_args)  # more `kvtier master` flags
        self.start_timeout_s = start_timeout_s
        self.http = http
        self.master = self.node = None
        self.master_port = self.node_port = None
        self.master_http_port = self.node_http_port = None
        self._ok = False

    def _http_port(self):
        return free_port() if self.http else None

    def _http_up(self, port):
        return port is None or _tcp_open(port)

    @property
    def master_address(self):
        return f"127.0.0.1:{self.master_port}"

    @property
    def node_address(self):
        return f"127.0.0.1:{self.node_port}"

    def start(self):
        try:
            self._start_master()
            self._start_node()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_master(self):
        # A port picked here may be taken before the process binds it: retry with fresh ones.
        for attempt in range(3):
            self.master_port, self.master_http_port = free_port(), self._http_port()
            self.master = _Process("master", [
                "master", "--host", "127.0.0.1", "--port", str(self.master_port),
                "--http-port", str(self.master_http_port or 0),
                "--default-kv-lease-ttl-ms", str(self.lease_ms), *self.master_args])
            try:
                _wait_for("kvtier master", self.master,
                          lambda: _tcp_open(self.master_port) and
                          self._http_up(self.master_http_port),
                          self.start_timeout_s)
                return
            except RuntimeError:
                self.master.stop()
                if attempt == 2:
                    raise

    def _start_node(self):
        for attempt in range(3):
            self.node_port, self.node_http_port = free_port(), self._http_port()
            self.node = _Process("node", [
                "node", "--master", self.master_address, "--host", "127.0.0.1",
                "--port", str(self.node_port), "--global-segment-size", self.segment,
                "--no-prefault", "--http-port", str(self.node_http_port or 0)])
            try:
                _wait_for("kvtier node", self.node,
                          lambda: self._node_serves() and self._http_up(self.node_http_port),
                          self.start_timeout_s)
                return
            except RuntimeError:
                self.node.stop()
                if attempt == 2:
                    raise

    def _node_serves(self):
        # Ready = it has printed its banner (the dummy socket is up) and a put lands (the segment
        # is mounted). The native _setup_dummy does not log the refusals of an early probe.
        if "kvtier node " not in self.node.log_text():
            return False
        probe = DistributedStore()
        try:
            if probe._setup_dummy(0, 1 << 20, self.node_address)[0] != 0:
                return False
            return probe.put(f"__probe__{os.getpid()}", b"ready") == 0
        finally:
            probe.close()

    def stop(self):
        """Stops both by PID (safe to call more than once)."""
        for p in (self.node, self.master):
            if p is not None:
                p.stop()

    def logs(self):
        return "\n".join(f"--- {p.name} ({p.log.name}) ---\n{p.log_text()}"
                         for p in (self.master, self.node) if p is not None)

    def remove_logs(self):
        for p in (self.master, self.node):
            if p is not None:
                p.remove_log()


@contextlib.contextmanager
def running_cluster(lease_ms, **options):
    """A started StoreCluster, stopped on exit; its logs are kept when the block failed."""
    c = StoreCluster(lease_ms=lease_ms, **options)
    try:
        c.start()
        yield c
    finally:
        c.stop()
    c.remove_logs()
