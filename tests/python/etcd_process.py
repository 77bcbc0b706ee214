"""A real single-member etcd for Python tests, like tests/support/etcd_process.h:
client and peer ports on 127.0.0.1, data in its own temp dir, stopped by pid.

    with EtcdProcess() as etcd:
        ...  # etcd.endpoint == "127.0.0.1:PORT"
        assert etcd_get(etcd.endpoint, b"key") is None

The child is a kvtier._process.Child: it gets SIGTERM when the test process dies.
"""

import base64
import json
import os
import shutil
import tempfile
import urllib.request

from kvtier._process import http_get, start_on_free_ports

ETCD_BINARY = "/usr/bin/etcd"


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


def _member_name(port):
    return f"kvtier-test-{os.getpid()}-{port}"


class EtcdProcess:
    """Starts etcd in __init__ (retrying on other ports if one was taken), waits until it is
    healthy and is ours; stop() (or leaving the `with` block) stops it and removes its dir."""

    @staticmethod
    def available():
        return os.access(ETCD_BINARY, os.X_OK)

    def __init__(self, attempts=5, start_timeout=20.0):
        self.dir = tempfile.mkdtemp(prefix="kvtier-etcd-")
        self.log_path = os.path.join(self.dir, "etcd.log")
        self.child = None
        try:
            self.child = start_on_free_ports("etcd", self._argv, self._ours_and_healthy,
                                             start_timeout, n_ports=2, attempts=attempts,
                                             log_path=self.log_path)
        except BaseException:
            self.stop()
            raise
        self.port, self.peer_port = self.child.ports
        self.endpoint = f"127.0.0.1:{self.port}"

    def _argv(self, port, peer_port):
        name = _member_name(port)
        client, peer = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{peer_port}"
        return [ETCD_BINARY, "--name", name,
                "--data-dir", os.path.join(self.dir, f"data-{port}"),
                "--listen-client-urls", client, "--advertise-client-urls", client,
                "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
                "--initial-cluster", f"{name}={peer}", "--initial-cluster-token", name,
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error"]

    @staticmethod
    def _ours_and_healthy(_, port, peer_port):
        """/health says true and the member list names our member (another etcd that grabbed
        the port in a race does not count)."""
        endpoint = f"127.0.0.1:{port}"
        if json.loads(http_get(f"http://{endpoint}/health")).get("health") != "true":
            return False
        members = _post(endpoint, "/v3/cluster/member/list", {})
        return any(m.get("name") == _member_name(port) for m in members.get("members", []))

    def log_tail(self, n=2000):
        return self.child.log_tail(n) if self.child else ""

    def stop(self):
        """SIGTERM, SIGKILL after 5 s; removes the temp dir. Safe to call twice."""
        if self.child is not None:
            self.child.stop(5)
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
