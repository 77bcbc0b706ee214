"""One connection to ``kvtier server`` that survives the server going away.

An engine must keep serving when its cache does not answer: ``get()`` hands out the client, or
None while the server is considered down; a failed call reports itself with ``failed()``, which
drops the connection (a restarted server would not know this client's HELLO or registration) and
waits ``retry_interval_s`` before the next attempt. One warning per outage, one line when it is
back. A server that comes back with a configuration the engine cannot use (``on_connect`` raised
ValueError, e.g. another chunk size) switches the link off for good: ``client()`` answers None
until the engine restarts.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from kvtier._kvtier import CacheClient, KvtierError

log = logging.getLogger("kvtier.integrations.vllm")

# Error codes after which the connection is not trusted any more (see docs/protocol.md section 4).
_CONNECTION_ERRORS = {"TIMEOUT", "IO_ERROR", "PROTOCOL_ERROR", "UNAVAILABLE", "NOT_REGISTERED",
                      "VERSION_MISMATCH", "PERMISSION_DENIED"}


def is_connection_error(e: BaseException) -> bool:
    return isinstance(e, KvtierError) and getattr(e, "code_name", "") in _CONNECTION_ERRORS


class ServerLink:
    """Thread-safe. ``on_connect(client, server_info)`` runs after each (re)connection, e.g. to
    register buffers: a KvtierError from it counts as a failed connection, anything else (a
    configuration error) propagates."""

    def __init__(self, settings, what: str,
                 on_connect: Callable[[CacheClient, dict], None] | None = None):
        self._s = settings
        self._what = what
        self._on_connect = on_connect
        self._lock = threading.Lock()
        self._client: CacheClient | None = None
        self._retry_at = 0.0
        self._down = False
        self.info: dict | None = None  # server_info() of the current connection
        self.off = False  # the connector stopped using the server until the engine restarts

    @property
    def address(self) -> str:
        return f"{self._s.host}:{self._s.port}"

    def get(self) -> CacheClient | None:
        with self._lock:
            if self._client is not None:
                return self._client
            if time.monotonic() < self._retry_at:
                return None
            client = None
            try:
                client = CacheClient(self._s.host, self._s.port, self._s.timeout_ms,
                                     auth_token_file=self._s.auth_token_file)
                info = client.server_info()
                if self._on_connect is not None:
                    self._on_connect(client, info)
            except KvtierError as e:
                if client is not None:
                    client.close()
                self._mark_down(e)
                return None
            except BaseException:
                if client is not None:
                    client.close()
                raise
            self._client, self.info = client, info
            if self._down:
                log.warning("kvtier connector (%s): the kvtier server at %s answers again",
                            self._what, self.address)
                self._down = False
            return client

    def client(self) -> CacheClient | None:
        """``get()`` for the connector's calls: None while the server is down or the link is
        off. A ValueError from ``on_connect`` is logged once and switches the link off (``get()``
        raises it instead, so that the engine's start-up can stop on it)."""
        if self.off:
            return None
        try:
            return self.get()
        except ValueError as e:
            log.error("kvtier connector (%s): %s; the connector is off until the engine restarts",
                      self._what, e)
            self.off = True
            return None

    def current(self) -> CacheClient | None:
        """The client if connected, without trying to connect."""
        return self._client

    def failed(self, e: BaseException) -> None:
        """A call on the client raised ``e``; drop the connection if it is no longer usable."""
        if not is_connection_error(e):
            return
        with self._lock:
            client, self._client = self._client, None
            if client is not None:
                client.close()
            self._mark_down(e)

    def _mark_down(self, e: BaseException) -> None:
        self._retry_at = time.monotonic() + self._s.retry_interval_s
        if not self._down:
            log.warning("kvtier connector (%s): the kvtier server at %s is unavailable (%s); "
                        "running without it, retrying every %.3g s", self._what, self.address, e,
                        self._s.retry_interval_s)
            self._down = True

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()
