"""A real kvtier store for the Python tests: `kvtier master` and `kvtier node` subprocesses on
free loopback ports (launchers.py), always stopped by PID (SIGTERM, then SIGKILL), logs kept for
failures."""

import contextlib
import os

from kvtier._process import free_port  # noqa: F401 (re-exported)
from kvtier.server import find_binary  # noqa: F401 (re-exported)
from kvtier.store import DistributedStore
from launchers import start_master, start_node


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

    @property
    def master_address(self):
        return f"127.0.0.1:{self.master_port}"

    @property
    def node_address(self):
        return f"127.0.0.1:{self.node_port}"

    def start(self):
        try:
            self.master = start_master(
                ["--default-kv-lease-ttl-ms", str(self.lease_ms), *self.master_args],
                http=self.http, timeout_s=self.start_timeout_s)
            self.master_port, self.master_http_port = self.master.port, self.master.http_port
            self.node = start_node(self.master_address, segment=self.segment, http=self.http,
                                   ready=_serves, timeout_s=self.start_timeout_s)
            self.node_port, self.node_http_port = self.node.port, self.node.http_port
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Stops both by PID (safe to call more than once)."""
        for p in (self.node, self.master):
            if p is not None:
                p.stop()

    def logs(self):
        return "\n".join(f"--- {p.name} ({p.log_path}) ---\n{p.log_text()}"
                         for p in (self.master, self.node) if p is not None)

    def remove_logs(self):
        for p in (self.master, self.node):
            if p is not None:
                p.remove_log()


def _serves(node):
    # A put lands: the segment is mounted. The native _setup_dummy does not log the refusals of
    # an early probe.
    probe = DistributedStore()
    try:
        if probe._setup_dummy(0, 1 << 20, node.address)[0] != 0:
            return False
        return probe.put(f"__probe__{os.getpid()}", b"ready") == 0
    finally:
        probe.close()


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
