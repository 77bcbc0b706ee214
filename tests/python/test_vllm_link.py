"""ServerLink (kvtier.integrations._vllm_link), the vLLM connector's one connection to the server:
its ``client()`` switches the connector off for good when the server answers with a configuration
the engine cannot use, while ``get()`` lets that error through for the engine's start-up."""

import logging
from types import SimpleNamespace

import pytest

from kvtier.integrations._vllm_link import ServerLink
from kvtier.server import LocalServer

LOG = "kvtier.integrations.vllm"


@pytest.fixture(scope="module")
def srv():
    with LocalServer(l1_size_gb=0.0625, chunk_size=64) as s:
        yield s


def settings(srv):
    return SimpleNamespace(host="127.0.0.1", port=srv.port, timeout_ms=5000, auth_token_file=None,
                           retry_interval_s=0.0)


def test_client_connects_and_reuses_the_connection(srv):
    link = ServerLink(settings(srv), "test")
    try:
        client = link.client()
        assert client is not None and link.client() is client and not link.off
        assert int(link.info["chunk_size"]) == 64
    finally:
        link.close()


def test_an_incompatible_server_switches_the_link_off_once(srv, caplog):
    calls = []

    def on_connect(client, info):
        calls.append(info["chunk_size"])
        raise ValueError("the server's chunk size does not fit")

    link = ServerLink(settings(srv), "test", on_connect=on_connect)
    try:
        with pytest.raises(ValueError):  # start-up: the engine stops on it
            link.get()
        with caplog.at_level(logging.ERROR, logger=LOG):
            assert link.client() is None
            assert link.client() is None
        assert link.off
        assert len(calls) == 2  # get() and the first client(); off, it does not connect again
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert errors == ["kvtier connector (test): the server's chunk size does not fit; the "
                          "connector is off until the engine restarts"]
    finally:
        link.close()
