"""LocalServer lifecycle and GIL release."""

import os
import threading
import time

import pytest

import kvtier
from kvtier.server import LocalServer, free_port


def test_local_server_starts_and_stops_by_pid():
    with LocalServer(l1_size_gb=0.0625, chunk_size=32) as srv:
        pid = srv.pid
        c = srv.client(timeout_ms=5000)
        assert c.server_info()["chunk_size"] == 32
        c.close()
        with pytest.raises(kvtier.KvtierError):
            c.ping()  # closed client
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert srv.pid is None


def test_bad_flags_fail_fast():
    with pytest.raises(RuntimeError, match="exited"):
        LocalServer(chunk_size=0, start_timeout_s=5).start()


def test_network_calls_release_the_gil():
    port = free_port()  # nothing listens: connecting waits for the full timeout

    def connect():
        with pytest.raises(kvtier.KvtierError):
            kvtier.CacheClient(port=port, timeout_ms=1000)

    t = threading.Thread(target=connect)
    t0 = time.monotonic()
    t.start()
    time.sleep(0.05)  # the behaviour under test: this thread gets the GIL back during the call
    # Had the call kept the GIL, this thread could only wake once it returned (after ~1 s).
    assert time.monotonic() - t0 < 0.5 and t.is_alive()
    t.join()
