"""The engine suite: the real vLLM, SGLang, LMCache and Mooncake packages driving kvtier.

Run by tests/engines/run.py inside the venv of scripts/engines-venv.sh, one pytest process per
engine (LMCache's tests import kvtier's `mooncake` package, Mooncake's import the real wheel's,
and both are called `mooncake`). The helpers of tests/python (store_cluster, LocalServer) are
shared from there.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))


CHUNK = 32  # tokens per kvtier chunk in the vLLM tests: two of vLLM's 16-token blocks


@pytest.fixture(scope="module")
def server():
    """A real kvtier server per test module (a module may define its own)."""
    from kvtier.server import LocalServer

    with LocalServer(l1_size_gb=0.0625, chunk_size=CHUNK) as srv:
        yield srv


@pytest.fixture(scope="module")
def model_dir():
    """A tiny vLLM model (config only, no weights) per test module (vllm_rig.py)."""
    from vllm_rig import make_model_dir

    return make_model_dir()
