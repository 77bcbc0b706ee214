"""The processes the Python tests and the soak start, on kvtier._process (LocalServer starts
`kvtier server`, etcd_process.py etcd): any `kvtier` subcommand, a master and a node ready on
free loopback ports, a redis-server. Every one is a kvtier._process.Child: stopped by PID, its
log kept in a file, a readiness timeout that names the log tail. Loads kvtier's native module
only to find the binary when none is given (the soak gives one)."""

import socket

from child_process import Child, http_ok, start_on_free_ports, tcp_open

NODE_BANNER = "kvtier node "  # the node prints it once its dummy socket is up


def find_binary(binary=None):
    """`binary`, else kvtier.server.find_binary()'s."""
    if binary:
        return str(binary)
    from kvtier.server import find_binary as find
    return find()


def spawn_kvtier(name, args, binary=None, **child):
    """`kvtier ARGS...` as a Child named `name`, not waited for."""
    return Child(name, [find_binary(binary), *args], **child)


def start_master(args=(), http=False, timeout_s=20.0, binary=None, **child):
    """`kvtier master` on 127.0.0.1, ready when its RPC port (and, with http, its HTTP port)
    answers. Adds `port`, `http_port` (None without http) and `address` to the Child."""
    def argv(port, http_port):
        return [find_binary(binary), "master", "--host", "127.0.0.1", "--port", port,
                "--http-port", http_port if http else 0, *args]

    def ready(_, port, http_port):
        return tcp_open(port) and (not http or tcp_open(http_port))

    c = start_on_free_ports("master", argv, ready, timeout_s, n_ports=2, **child)
    c.port, c.http_port = c.ports[0], c.ports[1] if http else None
    c.address = f"127.0.0.1:{c.port}"
    return c


def start_node(master, args=(), segment="64MB", http=False, ready=None, prefault=False,
               timeout_s=20.0, binary=None, **child):
    """`kvtier node` of `master` ("host:port" or etcd://...) on 127.0.0.1, ready when it has
    printed its banner, its HTTP port answers (with http) and ready(child) (when given) is true.
    Adds `port`, `http_port` and `address` to the Child."""
    def argv(port, http_port):
        return [find_binary(binary), "node", "--master", master, "--host", "127.0.0.1",
                "--port", port, "--global-segment-size", segment,
                *([] if prefault else ["--no-prefault"]),
                "--http-port", http_port if http else 0, *args]

    def is_ready(c, port, http_port):
        c.port, c.address, c.http_port = port, f"127.0.0.1:{port}", http_port if http else None
        return (NODE_BANNER in c.log_text() and (not http or tcp_open(http_port))
                and (ready is None or ready(c)))

    return start_on_free_ports("node", argv, is_ready, timeout_s, n_ports=2, **child)


def start_server(args=(), timeout_s=20.0, binary=None, **child):
    """`kvtier server` on 127.0.0.1, ready when GET /healthz answers 200: for a process without
    kvtier's native module (the soak); the tests use kvtier.server.LocalServer. Adds `port` and
    `http_port` to the Child."""
    def argv(port, http_port):
        return [find_binary(binary), "server", "--host", "127.0.0.1", "--port", port,
                "--http-port", http_port, *args]

    c = start_on_free_ports(
        "server", argv, lambda _, port, http_port: http_ok(f"http://127.0.0.1:{http_port}/healthz"),
        timeout_s, n_ports=2, **child)
    c.port, c.http_port = c.ports
    return c


def redis_call(port, command):
    """One inline RESP command to the redis on 127.0.0.1:port; its first reply line."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(command.encode() + b"\r\n")
        return s.recv(64).decode().strip()


def start_redis(data_dir, timeout_s=20.0, binary="redis-server", **child):
    """A redis-server on 127.0.0.1 without persistence, ready when it answers PING. Adds
    `port` to the Child."""
    def argv(port):
        return [binary, "--port", port, "--bind", "127.0.0.1", "--save", "",
                "--appendonly", "no", "--dir", data_dir]

    c = start_on_free_ports("redis", argv, lambda _, port: redis_call(port, "PING") == "+PONG",
                            timeout_s, **child)
    c.port = c.ports[0]
    return c
