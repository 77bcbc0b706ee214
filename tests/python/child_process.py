"""What every launcher of a server subprocess in the tests and benches shares: the child dies with
its parent, it is stopped by PID, a TCP port is probed. Imports no kvtier module, so a process that
must stay free of the native modules (bench/peer_clusters.py's orchestrator) can use it too."""

import ctypes
import os
import signal
import socket
import subprocess

_PR_SET_PDEATHSIG = 1


def die_with_parent():
    """A preexec_fn: SIGTERM to the child when its parent dies, so a killed test or bench leaves
    no server holding ports and memory."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def stop_process(proc, timeout_s=10.0):
    """Stops a subprocess.Popen by its PID: SIGTERM, SIGKILL after timeout_s; safe to repeat."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def tcp_open(port):
    """Whether something accepts connections on 127.0.0.1:port."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
