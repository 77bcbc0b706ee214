"""LocalServer: runs a `kvtier server` subprocess on free ports for tests, demos and notebooks."""

import ctypes
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from kvtier._cli import bundled_binary
from kvtier._kvtier import CacheClient, KvtierError

_PR_SET_PDEATHSIG = 1


_recent_ports = []


def free_port():
    """A free loopback TCP port for a listener about to start, drawn at random from below the
    ephemeral range: a port the kernel picks for bind(0) comes from the range outgoing
    connections take their local ports from, so another client may hold it by the time the
    listener binds. Never one of the last ports handed out in this process."""
    low, ephemeral_low = 10000, 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    high = ephemeral_low - 1 if ephemeral_low > low + 1000 else 65535
    for _ in range(200):
        port = random.randint(low, high)
        if port in _recent_ports:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _recent_ports.append(port)
        del _recent_ports[:-64]
        return port
    raise OSError("no free loopback port found")


def find_binary(binary=None):
    """The `kvtier` executable: `binary`, else $KVTIER_BIN, else the one installed with this
    package (a wheel), else the build dir above the package (build/python/kvtier)."""
    candidates = [binary, os.environ.get("KVTIER_BIN"), bundled_binary(),
                  Path(__file__).resolve().parents[2] / "kvtier"]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return str(c)
    raise FileNotFoundError("kvtier binary not found: pass binary= or set $KVTIER_BIN")


def _die_with_parent():
    # An orphaned server would hold its ports and memory after a crashed test run. (The signal
    # fires when the starting *thread* exits: start servers from a long-lived thread.)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


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
        self._proc = None
        self._log = None

    @property
    def pid(self):
        return self._proc.pid if self._proc else None

    @property
    def log_path(self):
        return self._log.name if self._log else None

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

    def _start_once(self):
        self.port, self.http_port = free_port(), free_port()
        args = [self.binary, "server", "--host", "127.0.0.1", "--port", str(self.port),
                "--http-port", str(self.http_port), "--l1-size-gb", str(self.l1_size_gb),
                "--chunk-size", str(self.chunk_size), "--log-level", self.log_level]
        if not self.prefault:
            args.append("--no-l1-prefault")
        if self.auth_token_file:
            args += ["--auth-token-file", str(self.auth_token_file)]
        self._log = tempfile.NamedTemporaryFile(prefix="kvtier-server-", suffix=".log",
                                                delete=False)
        self._proc = subprocess.Popen(args + self.extra_args, stdin=subprocess.DEVNULL,
                                      stdout=self._log, stderr=subprocess.STDOUT,
                                      preexec_fn=_die_with_parent,
                                      # Ctrl-C reaches only us; we stop the server after the
                                      # call in flight returns, so no reply is ever lost.
                                      start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"kvtier server exited with {self._proc.returncode}:\n"
                                   + self.log_tail())
            try:
                c = self.client(timeout_ms=200)
                c.ping()
                c.close()
                return
            except KvtierError:
                time.sleep(0.02)
        raise RuntimeError("kvtier server did not answer PING in time:\n" + self.log_tail())

    def log_tail(self, max_bytes=4000):
        if not self._log:
            return ""
        with open(self._log.name, "rb") as f:
            data = f.read()
        return data[-max_bytes:].decode(errors="replace")

    def stop(self):
        """SIGTERM, wait, SIGKILL on timeout. Returns the exit code (None if never started)."""
        proc, self._proc = self._proc, None
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=self.stop_timeout_s)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            code = proc.returncode
        if self._log is not None:
            self._log.close()
            os.unlink(self._log.name)
            self._log = None
        return code

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False
