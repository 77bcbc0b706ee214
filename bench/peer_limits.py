"""The machine limits bench/mooncake_peer.py prints next to the stores, measured in the same run:
single-thread memcpy GB/s (numpy copyto between warm buffers of one batch), and the round trip
of a 64-byte message between two processes over loopback TCP (TCP_NODELAY) and over a Unix
stream socket, from Python like the store calls (the floor of a request/reply a Python caller
makes, including the interpreter's part of it)."""

import os
import socket
import statistics
import time

import numpy as np


def memcpy_gbps(nbytes, rounds=10):
    src = np.full(nbytes, 3, dtype=np.uint8)
    dst = np.zeros(nbytes, dtype=np.uint8)
    np.copyto(dst, src)  # both touched before timing
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        np.copyto(dst, src)
        rates.append(nbytes / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def _recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("peer closed")
        buf += chunk
    return buf


def _ping_pong(a, b, calls):
    """p50/p99 of a's round trips (microseconds) to an echo of b in a forked child."""
    pid = os.fork()
    if pid == 0:  # the echo: exits without running the parent's cleanup
        try:
            a.close()
            for _ in range(calls + 100):
                b.sendall(_recv_exact(b, 64))
        finally:
            os._exit(0)
    b.close()
    msg, lat = b"x" * 64, []
    for i in range(calls + 100):
        start = time.perf_counter()
        a.sendall(msg)
        _recv_exact(a, 64)
        if i >= 100:  # the first 100 warm the path up
            lat.append((time.perf_counter() - start) * 1e6)
    a.close()
    os.waitpid(pid, 0)
    lat.sort()
    return {"p50_us": lat[len(lat) // 2], "p99_us": lat[min(len(lat) - 1, int(len(lat) * 0.99))]}


def tcp_round_trip(calls=2000):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    a = socket.create_connection(server.getsockname())
    b, _ = server.accept()
    server.close()
    for s in (a, b):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return _ping_pong(a, b, calls)


def uds_round_trip(calls=2000):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return _ping_pong(a, b, calls)
