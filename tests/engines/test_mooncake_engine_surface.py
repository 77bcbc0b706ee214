"""kvtier's `mooncake.engine` against the installed Mooncake wheel's: every name of the wheel's
module is there unless ALLOWED_MISSING says why not, `TransferEngine` has every method of the
wheel's with the same parameters, and where both can answer without a peer (an unreachable one)
they answer alike.

This process imports the real wheel; kvtier's package (also called `mooncake`) runs in a
subprocess with build/mooncake_compat on its path, as in test_mooncake_api_surface.py."""

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import kvtier
import mooncake.engine as wheel
from test_mooncake_api_surface import _public, _wheel_params

# Names of the wheel's mooncake.engine that kvtier's leaves out, and why
# (docs/mooncake-migration.md, "mooncake.engine").
ALLOWED_MISSING = {
    # Mooncake's RPC layer between processes (tensors and bytes over the transfer engine).
    "CoroRPCInterface": "RPC over the transfer engine (kvtier has none)",
    "RpcInterface": "RPC over the transfer engine (kvtier has none)",
    "ReceivedData": "RPC over the transfer engine (kvtier has none)",
    "ReceivedTensor": "RPC over the transfer engine (kvtier has none)",
    "create_rpc_client": "RPC over the transfer engine (kvtier has none)",
    "create_rpc_server": "RPC over the transfer engine (kvtier has none)",
    # The C++ engine object get_engine() hands to other extensions; there is none here.
    "InnerTransferEngine": "Mooncake's C++ engine object",
    # Device memory shared between processes of one node (CUDA IPC / fabric handles).
    "SharedSegment": "shared device memory segments (not offered)",
}


def _compat_env():
    build_python = Path(kvtier.__file__).resolve().parents[1]
    compat = build_python.parent / "mooncake_compat"
    assert (compat / "mooncake" / "engine.py").exists(), f"no {compat}/mooncake/engine.py"
    return dict(os.environ, PYTHONPATH=os.pathsep.join([str(compat), str(build_python)]))


_KVTIER_SCRIPT = r"""
import inspect, json
import mooncake, mooncake.engine as m
assert mooncake.IS_KVTIER
T = m.TransferEngine
params = {}
for name in dir(T):
    fn = getattr(T, name)
    if callable(fn) and not name.startswith("__") and not inspect.isclass(fn):
        params[name] = [[p.name, p.kind.name, p.default is not inspect.Parameter.empty,
                         repr(p.default)] for p in inspect.signature(fn).parameters.values()]
print(json.dumps({"module": dir(m), "engine": dir(T), "instance": dir(T()), "params": params,
                  "opcode": {k: int(v) for k, v in m.TransferOpcode.__members__.items()},
                  "support": {n: getattr(m, n) for n in dir(m) if n.startswith("SUPPORT_")},
                  "exported": {n: repr(getattr(m, n)) for n in ("Read", "Write")}}))
"""


@pytest.fixture(scope="module")
def kv():
    proc = subprocess.run([sys.executable, "-c", _KVTIER_SCRIPT], env=_compat_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_module_names(kv):
    missing = [n for n in _public(dir(wheel)) if n not in kv["module"] and n not in ALLOWED_MISSING]
    assert missing == []


def test_allow_list_names_only_what_the_wheel_has(kv):
    for name in ALLOWED_MISSING:
        assert hasattr(wheel, name), f"{name}: the wheel has no such name"
        assert name not in kv["module"], f"{name}: kvtier provides it; drop it from the list"


def test_transfer_engine_has_every_method_of_the_wheels(kv):
    missing = [n for n in _public(dir(wheel.TransferEngine)) if n not in kv["engine"]]
    assert missing == []
    # Construction works (LMCache builds one before it initializes it).
    assert "initialize" in kv["instance"]


def test_transfer_engine_signatures(kv):
    mismatches = []
    for name in _public(dir(wheel.TransferEngine)):
        fn = getattr(wheel.TransferEngine, name)
        if inspect.isclass(fn) or not fn.__doc__ or f"{name}(" not in fn.__doc__:
            continue  # TransferOpcode, pybind's own
        theirs = _wheel_params(fn.__doc__, name)
        ours = [p for p in kv["params"][name] if p[0] != "self"]
        if len(ours) != len(theirs):
            mismatches.append(f"{name}: kvtier {[p[0] for p in ours]} wheel {theirs}")
            continue
        for (pname, kind, has_default, default), (tname, t_has_default, tdefault) in zip(
                ours, theirs):
            if tname is None and kind != "POSITIONAL_ONLY":
                # The wheel's argN cannot be passed by keyword; neither can kvtier's.
                mismatches.append(f"{name}({pname}): positional-only in the wheel")
            elif tname is not None and (pname, kind) != (tname, "POSITIONAL_OR_KEYWORD"):
                mismatches.append(f"{name}: parameter {pname!r} ({kind}) is {tname!r}")
            elif (has_default, default if has_default else "") != (t_has_default, tdefault):
                mismatches.append(f"{name}({pname}): default {default} vs wheel's {tdefault}")
    assert mismatches == []


def test_opcodes_and_flags(kv):
    assert kv["opcode"] == {k: int(v) for k, v in wheel.TransferOpcode.__members__.items()}
    assert kv["exported"] == {"Read": "<TransferOpcode.Read: 0>",
                              "Write": "<TransferOpcode.Write: 1>"}
    # Same flags as the wheel; kvtier's drives no transport, so all are False.
    assert sorted(kv["support"]) == sorted(n for n in dir(wheel) if n.startswith("SUPPORT_"))
    assert not any(kv["support"].values())


# One engine, calls to a peer nobody listens on: the answers of both packages, as JSON.
# Mooncake's engine must be initialized first (its calls crash the process otherwise); kvtier's
# initialize fails, and the calls after it answer as a failed engine's do.
_UNREACHABLE_SCRIPT = r"""
import ctypes, json, sys
import mooncake
from mooncake.engine import TransferEngine, TransferOpcode
e = TransferEngine()
init = e.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", "")
buf = ctypes.create_string_buffer(4096)
a = ctypes.addressof(buf)
peer = "127.0.0.1:1"
calls = {
    "transfer_sync_read": lambda: e.transfer_sync_read(peer, a, 0, 16),
    "transfer_sync_write": lambda: e.transfer_sync_write(peer, a, 0, 16),
    "transfer_sync": lambda: e.transfer_sync(peer, a, 0, 16, TransferOpcode.Read),
    "batch_transfer_sync_read": lambda: e.batch_transfer_sync_read(peer, [a], [0], [16]),
    "batch_transfer_sync_write": lambda: e.batch_transfer_sync_write(peer, [a], [0], [16]),
    "batch_transfer_async_read": lambda: e.batch_transfer_async_read(peer, [a], [0], [16]),
    "batch_transfer_async_write": lambda: e.batch_transfer_async_write(peer, [a], [0], [16]),
    "batch_transfer_async": lambda: e.batch_transfer_async(peer, [a], [0], [16],
                                                            TransferOpcode.Write),
    "transfer_submit_write": lambda: e.transfer_submit_write(peer, a, 0, 16),
    "get_first_buffer_address": lambda: e.get_first_buffer_address(peer),
    "send_probe is negative": lambda: e.send_probe(peer) < 0,
    "get_notifies": lambda: e.get_notifies(),
    "write_bytes_to_buffer": lambda: e.write_bytes_to_buffer(a, b"abcd", 4),
    "read_bytes_from_buffer": lambda: e.read_bytes_from_buffer(a, 6).hex(),
}
out = {"is_kvtier": getattr(mooncake, "IS_KVTIER", False), "initialize": init}
for label, fn in calls.items():
    out[label] = fn()
print(json.dumps(out))
"""


def _answers(env):
    proc = subprocess.run([sys.executable, "-c", _UNREACHABLE_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def test_a_failed_engine_answers_as_the_wheels_does_for_an_unreachable_peer():
    # kvtier's build/python only: `mooncake` is the wheel's.
    env = dict(os.environ, PYTHONPATH=str(Path(kvtier.__file__).resolve().parents[1]))
    theirs, _ = _answers(env)
    ours, log = _answers(_compat_env())
    assert (theirs.pop("is_kvtier"), ours.pop("is_kvtier")) == (False, True)
    assert theirs.pop("initialize") == 0
    assert ours.pop("initialize") == -1
    assert ours == theirs
    # One error, naming what is missing and what to use instead.
    assert log.count("has no peer-to-peer transfer engine") == 1, log
    assert "TransferEngine.initialize fails" in log and "mooncake.store" in log
