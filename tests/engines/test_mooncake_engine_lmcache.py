"""LMCache beside kvtier's `mooncake` package: its MP client and its transfer-channel registry
import (lmcache's transfer channels import `mooncake.engine.TransferEngine` and skip Mooncake
only when `mooncake` itself is absent), Mooncake's channel registers, and creating it fails
with LMCache's own error and kvtier's one message, instead of a channel that moves nothing.

Runs in a subprocess with build/mooncake_compat first on the path (this suite's process has the
real wheel imported)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import kvtier

_SCRIPT = r"""
import ctypes, json
import mooncake, mooncake.engine
# The MP client's modules, as tests/engines/test_lmcache_mp_reference.py imports them.
from lmcache.utils import EngineType
from lmcache.v1.multiprocess.custom_types import IPCCacheServerKey
from lmcache.v1.multiprocess.group_view import EngineGroupInfo
from lmcache.v1.multiprocess.transfer_context import create_transfer_context
from lmcache.v1.multiprocess.transport.factory import RequestClientFactory
import lmcache.v1.distributed.transfer_channel.impl  # every channel registers itself
from lmcache.v1.distributed.transfer_channel import factory
from lmcache.v1.distributed.transfer_channel.impl import mooncake_te_impl
from lmcache.v1.distributed.internal_api import L1MemoryDesc

out = {"is_kvtier": mooncake.IS_KVTIER,
       "engine_file": mooncake.engine.__file__,
       "te_is_ours": mooncake_te_impl.TransferEngine is mooncake.engine.TransferEngine,
       "registered": sorted(factory._TRANSFER_CHANNEL_FACTORY_REGISTRY)}
buf = ctypes.create_string_buffer(1 << 16)
desc = L1MemoryDesc(ptr=ctypes.addressof(buf), size=len(buf), align_bytes=4096)
try:
    factory.create_transfer_channel_context("mooncake_te", desc, "127.0.0.1:0", "127.0.0.1:0")
    out["create"] = "created"
except Exception as e:
    out["create"] = f"{type(e).__name__}: {e}"
print(json.dumps(out))
"""


def test_lmcache_mp_client_and_channels_import_beside_kvtiers_mooncake():
    build_python = Path(kvtier.__file__).resolve().parents[1]
    compat = build_python.parent / "mooncake_compat"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(compat), str(build_python)]))
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["is_kvtier"] is True
    assert Path(out["engine_file"]).resolve() == (compat / "mooncake" / "engine.py").resolve()
    assert out["te_is_ours"] is True
    assert {"mooncake_te", "nixl"} <= set(out["registered"])
    assert out["create"].startswith("RuntimeError: Failed to initialize mooncake_te engine")
    assert proc.stderr.count("has no peer-to-peer transfer engine") == 1, proc.stderr[-4000:]
