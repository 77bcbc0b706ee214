"""LocalServer: runs a `kvtier server` subprocess on free ports for tests, demos and notebooks."""

import os
from pathlib import Path

from kvtier._cli import bundled_binary
from kvtier._kvtier import CacheClient, KvtierError
from kvtier._process import Child, free_port  # noqa: F401 (free_port: re-exported)


def find_binary(binary=None):
    """The `kvtier` executable: `binary`, else $KVTIER_BIN, else the one installed with this
    package (a wheel), else the build dir above the package (build/python/kvtier)."""
    candidates = [binary, os.environ.get("KVTIER_BIN"), bundled_binary(),
                  Path(__file__).resolve().parents[2] / "kvtier"]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return str(c)
    raise FileNotFoundError("kvtier binary not found: pass binary= or set $KVTIER_BIN")


class LocalServer:
    """Context manager: starts the server, waits until it answers PING, stops it on exit.

    Attributes once started: ``port`` (ZMQ), ``http_port``, ``pid``, ``log_path``.
    With ``auth_token_file``, the server requires that secret and ``client()`` presents it.
    """

    def __init__(self, binary=None, l1_size_gb=0.25, chunk_size=256, extra_args=(),
                 start_timeout_s=15.0, stop_timeout_s=10.0, log_level="warn", prefault=False,
                 auth_token_file=None):
        self.binary = find_binary(binary)
        self.l1_size_gb = l1_size_gb
        self.chunk_size = chunk_size
        self.extra_args = list(extra_args)
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.log_level = log_level
        self.prefault = prefault
        self.auth_token_file = auth_token_file
        self.port = self.http_port = None
        self._child = None

    @property
    def pid(self):
        return self._child.pid if self._child else None

    @property
    def log_path(self):
        return self._child.log_path if self._child else None

    def client(self, timeout_ms=30000):
        return CacheClient("127.0.0.1", self.port, timeout_ms,
                           auth_token_file=self.auth_token_file)

    def start(self):
        # A port picked here may be taken before the server binds it: retry with fresh ones.
        last_error = None
        for _ in range(3):
            try:
                self._start_once()
                return self
            except RuntimeError as e:
                last_error = e
                self.stop()
        raise last_error

    def _start_once(self, port=None):
        """One try; `port`: the ZMQ port to use instead of a free one (a restart on the same
        port)."""
        self.port, self.http_port = port or free_port(), free_port()
        args = [self.binary, "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--http-port", str(self.http_port), "--l1-size-gb", str(self.l1_size_gb),
                "--chunk-size", str(self.chunk_size), "--log-level", self.log_level]
        if not self.prefault:
            args.append("--no-l1-prefault")
        if self.auth_token_file:
            args += ["--auth-token-file", str(self.auth_token_file)]
        # A session of its own: Ctrl-C reaches only us; we stop the server after the call in
        # flight returns, so no reply is ever lost.
        self._child = Child("server", args + self.extra_args, new_session=True)
        self._child.wait_ready(self._answers_ping, self.start_timeout_s,
                               "kvtier server (PING)")

    def _answers_ping(self):
        try:
            c = self.client(timeout_ms=200)
            c.ping()
            c.close()
            return True
        except KvtierError:
            return False

    def log_tail(self, max_bytes=4000):
        return self._child.log_tail(max_bytes) if self._child else ""

    def stop(self):
        """SIGTERM, wait, SIGKILL on timeout. Returns the exit code (None if never started)."""
        child, self._child = self._child, None
        if child is None:
            return None
        code = child.stop(self.stop_timeout_s)
        child.remove_log()
        return code

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
