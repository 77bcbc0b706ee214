"""A real single-member etcd for Python tests, like tests/support/etcd_process.h:
client and peer ports on 127.0.0.1, data in its own temp dir, stopped by pid.

    with EtcdProcess() as etcd:
        ...  # etcd.endpoint == "127.0.0.1:PORT"
        assert etcd_get(etcd.endpoint, b"key") is None

The child gets PR_SET_PDEATHSIG (SIGKILL), so a test process that dies leaves no etcd behind.
"""

import base64
import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from kvtier.server import free_port

ETCD_BINARY = "/usr/bin/etcd"
_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _post(endpoint, path, body, timeout=2.0):
    """POSTs JSON to etcd's gateway; the parsed answer (raises urllib.error.URLError)."""
    req = urllib.request.Request(f"http://{endpoint}{path}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def etcd_get(endpoint, key, timeout=2.0):
    """The value of `key` (bytes or str) in the etcd at `endpoint` ("host:port"), as bytes, or
    None when the key does not exist."""
    if isinstance(key, str):
        key = key.encode()
    answer = _post(endpoint, "/v3/kv/range", {"key": base64.b64encode(key).decode()}, timeout)
    kvs = answer.get("kvs") or []
    if not kvs:
        return None
    return base64.b64decode(kvs[0].get("value", ""))  # an empty value is left out


class EtcdProcess:
    """Starts etcd in __init__ (retrying on other ports if one was taken), waits until it is
    healthy and is ours; stop() (or leaving the `with` block) kills it and removes its dir."""

    @staticmethod
    def available():
        return os.access(ETCD_BINARY, os.X_OK)

    def __init__(self, attempts=5, start_timeout=20.0):
        self.dir = tempfile.mkdtemp(prefix="kvtier-etcd-")
        self.log_path = os.path.join(self.dir, "etcd.log")
        self.proc = None
        try:
            for _ in range(attempts):
                self.port, self.peer_port = free_port(), free_port()
                self.endpoint = f"127.0.0.1:{self.port}"
                self._spawn()
                if self._wait_ready(start_timeout):
                    return
                self._kill()
            raise RuntimeError(f"etcd did not start; log tail:\n{self.log_tail()}")
        except BaseException:
            self.stop()
            raise

    def _spawn(self):
        self.name = f"kvtier-test-{os.getpid()}-{self.port}"
        client = f"http://127.0.0.1:{self.port}"
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [ETCD_BINARY, "--name", self.name,
                "--data-dir", os.path.join(self.dir, f"data-{self.port}"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"{self.name}={peer}",
                "--initial-cluster-token", self.name,
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error"]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         preexec_fn=_die_with_parent, close_fds=True)

    def _wait_ready(self, timeout):
        """True once /health says true and the member list names our member (another etcd
        that grabbed the port in a race does not count); False if ours exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"http://{self.endpoint}/health", timeout=2) as r:
                    healthy = json.loads(r.read()).get("health") == "true"
                if healthy:
                    members = _post(self.endpoint, "/v3/cluster/member/list", {})
                    if any(m.get("name") == self.name for m in members.get("members", [])):
                        return True
            except (OSError, ValueError, urllib.error.URLError):
                pass
            time.sleep(0.05)
        return False

    def _kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        self.proc = None

    def log_tail(self, n=2000):
        try:
            with open(self.log_path, "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        """SIGTERM, SIGKILL after 5 s; removes the temp dir. Safe to call twice."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self._kill()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
