"""Child processes, launched one way for LocalServer, the tests and the soak: spawn an argv with its
output in a private log, wait with a deadline until it is ready (a port answers, a log line shows,
an HTTP 200), stop it by PID (SIGTERM, SIGKILL after a deadline, reap).

Imports nothing of kvtier, so it loads without the native module: tests/python/child_process.py
loads this file by path for the processes that must stay free of it (bench/peer_clusters.py)."""

import ctypes
import os
import random
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

_PR_SET_PDEATHSIG = 1
POLL_S = 0.02  # how often wait_until asks again; the condition, not this, ends a wait


class ProcessError(RuntimeError):
    """A child that exited, or was not ready, before its deadline; the message ends with the
    child's log tail."""


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


def die_with_parent():
    """A preexec_fn: SIGTERM to the child when its parent dies, so a crashed test leaves no
    server holding ports and memory. (The signal fires when the starting *thread* exits: start
    children from a long-lived thread.)"""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def tcp_open(port, host="127.0.0.1", timeout_s=0.5):
    """Whether something accepts connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def http_get(url, timeout_s=2.0):
    """The body of a GET that answers 200, as text; raises OSError (URLError, HTTPError)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return r.read().decode(errors="replace")


def http_ok(url, timeout_s=1.0):
    """Whether a GET of url answers 200."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            return r.status == 200
    except (OSError, ValueError):
        return False


def wait_until(ready, timeout_s, what, child=None, interval_s=POLL_S):
    """The first true value of ready(), asked every interval_s. ready() raising OSError or
    ValueError counts as not yet. Raises ProcessError naming `what` when timeout_s passes, or
    when `child` (a Child) exits first, with the child's log tail."""
    deadline = time.monotonic() + timeout_s
    while True:
        if child is not None and not child.alive():
            raise ProcessError(f"{what} exited with {child.returncode} before it was ready"
                               + child.tail_block())
        try:
            value = ready()
        except (OSError, ValueError):
            value = None
        if value:
            return value
        if time.monotonic() >= deadline:
            raise ProcessError(f"{what} not ready after {timeout_s:g} s"
                               + (child.tail_block() if child is not None else ""))
        time.sleep(interval_s)  # the poll interval; the condition ends the wait


def stop_popen(popen, timeout_s=10.0, sig=signal.SIGTERM):
    """Stops a subprocess.Popen by its PID: `sig`, SIGKILL after timeout_s, reaped. Returns the
    exit code; safe to repeat."""
    if popen.poll() is None:
        try:
            os.kill(popen.pid, sig)
            popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        popen.wait()
    return popen.returncode


class Child:
    """One child process with its stdout and stderr in a log file (a fresh temp file unless
    log_path is given). It gets SIGTERM when this process dies. `stop()` is safe to repeat."""

    def __init__(self, name, argv, env=None, cwd=None, log_path=None, new_session=False):
        self.name = name
        self.argv = [str(a) for a in argv]
        if log_path is None:
            fd, log_path = tempfile.mkstemp(prefix=f"kvtier-{name}-", suffix=".log")
            os.close(fd)
        self.log_path = str(log_path)
        with open(self.log_path, "ab") as log:
            # new_session: Ctrl-C in a terminal reaches only us, and we stop the child.
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                          preexec_fn=die_with_parent, close_fds=True,
                                          start_new_session=new_session)

    @property
    def pid(self):
        return self.popen.pid

    @property
    def returncode(self):
        return self.popen.poll()

    def alive(self):
        return self.popen.poll() is None

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_tail(self, max_chars=4000):
        return self.log_text()[-max_chars:]

    def tail_block(self):
        return f"; {self.name} log ({self.log_path}) ends:\n{self.log_tail()}"

    def wait_ready(self, ready, timeout_s, what=None):
        """ready()'s first true value; ProcessError if this child exits or timeout_s passes."""
        return wait_until(ready, timeout_s, what or self.name, child=self)

    def wait_port(self, port, timeout_s, host="127.0.0.1"):
        return self.wait_ready(lambda: tcp_open(port, host), timeout_s,
                               f"{self.name} (port {port})")

    def wait_log(self, text, timeout_s):
        return self.wait_ready(lambda: text in self.log_text(), timeout_s,
                               f"{self.name} (log line {text!r})")

    def wait_http(self, url, timeout_s):
        return self.wait_ready(lambda: http_ok(url), timeout_s, f"{self.name} ({url} 200)")

    def wait_exit(self, timeout_s):
        """The exit code once the child exits; ProcessError if it still runs after timeout_s."""
        try:
            return self.popen.wait(timeout_s)
        except subprocess.TimeoutExpired:
            raise ProcessError(f"{self.name} still runs after {timeout_s:g} s"
                               + self.tail_block()) from None

    def signal(self, sig):
        """Sends `sig` to the child if it still runs (by PID, never by name)."""
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, timeout_s=10.0):
        """SIGTERM, SIGKILL after timeout_s, reaped; the exit code."""
        return stop_popen(self.popen, timeout_s)

    def kill(self):
        """SIGKILL, reaped; the exit code."""
        return stop_popen(self.popen, 0, signal.SIGKILL)

    def remove_log(self):
        try:
            os.unlink(self.log_path)
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def start_on_free_ports(name, argv_for, ready_for, timeout_s, n_ports=1, attempts=3, **child):
    """A Child that is ready, on n_ports fresh free ports: argv_for(*ports) is its argv and
    ready_for(child, *ports) its readiness check. A port taken between the pick and the bind
    fails that attempt; the next one picks new ports. The ports are in `child.ports`."""
    for attempt in range(attempts):
        ports = [free_port() for _ in range(n_ports)]
        c = Child(name, argv_for(*ports), **child)
        c.ports = ports
        try:
            c.wait_ready(lambda: ready_for(c, *ports), timeout_s)
            return c
        except ProcessError:
            c.stop()
            if attempt == attempts - 1:
                raise
            c.remove_log()
        except BaseException:
            c.stop()
            raise
