"""Shared fixtures: one real `kvtier server` per test session, fresh names per test."""

import itertools
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # spawned workers import _workers from here

import kvtier  # noqa: E402
from kvtier.server import LocalServer  # noqa: E402
from kvtier.store import MooncakeDistributedStore  # noqa: E402

CHUNK = 64  # small chunks keep the tests fast; block_tokens (16) must divide it
_ids = itertools.count(1)


@pytest.fixture(scope="session")
def server():
    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK) as srv:
        yield srv


@pytest.fixture
def client(server):
    c = server.client(timeout_ms=10000)
    yield c
    c.close()


@pytest.fixture
def uid():
    """A fresh integer per test, for instance ids, model names and request ids."""
    return next(_ids) * 100


@pytest.fixture
def prefix(request):
    """Store keys unique to this test and this run."""
    return f"{request.node.name}-{os.getpid()}-{next(_ids)}"


@pytest.fixture(params=["dummy", "embedded"])
def store(request, cluster):
    """A store client in each mode, against the requesting module's `cluster` fixture (a
    store_cluster.StoreCluster): a dummy of its node, and an embedded node in this process."""
    s = MooncakeDistributedStore()
    if request.param == "dummy":
        assert s.setup_dummy(8 << 20, 8 << 20, cluster.node_address) == 0, cluster.logs()
    else:
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", "32MB", "8MB", "tcp", "",
                       cluster.master_address) == 0, cluster.logs()
    yield s
    s.close()
