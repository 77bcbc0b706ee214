"""kvtier._process, the one way the tests, LocalServer and the soak launch children: the log,
the waits with a deadline and their errors, the stop by PID, the retry on fresh ports."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kvtier._process import (Child, ProcessError, free_port, start_on_free_ports, tcp_open,
                             wait_until)

SH = "/bin/sh"


def test_the_log_holds_stdout_and_stderr_and_env_reaches_the_child():
    with Child("echo", [SH, "-c", 'echo "out $KVT_TEST"; echo err >&2; exec sleep 60'],
               env={**os.environ, "KVT_TEST": "42"}) as c:
        c.wait_log("err", 10)
        assert "out 42" in c.log_text()
    c.remove_log()


def test_stop_terminates_reaps_and_can_repeat():
    c = Child("sleeper", [SH, "-c", "exec sleep 60"])
    assert c.alive()
    assert c.stop() == -signal.SIGTERM
    with pytest.raises(ProcessLookupError):
        os.kill(c.pid, 0)  # reaped: the PID is gone, not a zombie
    assert c.stop() == -signal.SIGTERM
    c.remove_log()


def test_stop_kills_a_child_that_ignores_sigterm():
    c = Child("stubborn", [SH, "-c", "trap '' TERM; echo trapped; while :; do sleep 1; done"])
    c.wait_log("trapped", 10)
    assert c.stop(timeout_s=0.2) == -signal.SIGKILL
    c.remove_log()


def test_a_child_that_exits_first_is_an_error_with_its_log_tail():
    c = Child("quitter", [SH, "-c", "echo the reason it quit; exit 3"])
    with pytest.raises(ProcessError, match=r"(?s)quitter.*exited with 3.*the reason it quit"):
        c.wait_ready(lambda: False, 10)
    c.remove_log()


def test_a_deadline_is_an_error_naming_what_was_awaited():
    with Child("idle", [SH, "-c", "echo idling; exec sleep 60"]) as c:
        c.wait_log("idling", 10)
        with pytest.raises(ProcessError, match=r"(?s)idle \(port \d+\) not ready after 0.2 s.*"
                                               r"idling"):
            c.wait_port(free_port(), 0.2)
    c.remove_log()
    with pytest.raises(ProcessError, match="the impossible not ready"):
        wait_until(lambda: False, 0.05, "the impossible")


def test_wait_until_returns_the_first_true_value_and_treats_oserror_as_not_yet():
    answers = iter([OSError("refused"), None, 0, "ready"])

    def ready():
        a = next(answers)
        if isinstance(a, Exception):
            raise a
        return a
    assert wait_until(ready, 10, "the answer", interval_s=0) == "ready"


def test_a_port_taken_is_retried_on_fresh_ports():
    tries = []

    def argv(port):
        tries.append(port)
        script = ("import socket, sys, time; s = socket.socket(); "
                  "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(60)")
        if len(tries) == 1:  # the first attempt fails the way a port taken would
            return [SH, "-c", "echo address in use; exit 1"]
        return [sys.executable, "-c", script, port]

    c = start_on_free_ports("listener", argv, lambda _, port: tcp_open(port), 20)
    try:
        assert len(tries) == 2 and c.ports == [tries[1]] and tcp_open(c.ports[0])
    finally:
        c.stop()
        c.remove_log()


def test_child_process_loads_it_without_the_native_module():
    here = Path(__file__).parent
    code = ("import sys; import child_process as cp; "
            "assert 'kvtier' not in sys.modules, sorted(m for m in sys.modules if 'kvtier' in m); "
            "c = cp.Child('t', ['/bin/true']); print(c.wait_exit(10)); c.remove_log()")
    out = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, text=True,
                         timeout=60, env={**os.environ, "PYTHONPATH": str(here)})
    assert out.returncode == 0 and out.stdout.strip() == "0", out.stderr
