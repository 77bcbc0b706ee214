"""Every name the installed Mooncake wheel's ``mooncake.store`` offers is in kvtier's `mooncake`
package too, with the same parameters, unless ALLOWED_MISSING below says why not.

This process imports the real wheel; kvtier's package (also called `mooncake`) is inspected in
a subprocess with build/mooncake_compat on its path. Method signatures come from the pybind
docstrings of the wheel ("name(self: ..., key: str, config: ... = <...>) -> int")."""

import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kvtier
import mooncake.store as wheel

# Names of the wheel that kvtier leaves out on purpose, and why (docs/mooncake-migration.md).
ALLOWED_MISSING = {
    # A pool of registered staging buffers handed out as leases. kvtier's register_buffer and
    # alloc_from_mem_pool cover what the engines do with it; not offered yet.
    "BufferLease": "staging-buffer pool (not offered yet)",
    "BufferLeaseView": "staging-buffer pool (not offered yet)",
    "BufferPool": "staging-buffer pool (not offered yet)",
    "RegisteredBufferLease": "staging-buffer pool (not offered yet)",
    "RegisteredBufferLeaseView": "staging-buffer pool (not offered yet)",
    "RegisteredBufferPool": "staging-buffer pool (not offered yet)",
    # Mooncake's embedding-table ("Engram") store: a model feature built on the store, not a
    # part of the KV-cache API.
    "EngramStore": "embedding-table store, not KV cache",
    "EngramStoreConfig": "embedding-table store, not KV cache",
    # NVMe-oF segments: kvtier segments are memory only.
    "MooncakeDistributedNoFRegister": "NVMe-oF segments (kvtier keeps memory segments only)",
    # Hand Mooncake's C++ client object to other C++ extensions (LMCache's RealClient links
    # it); kvtier's client is not Mooncake's C++ class, so there is nothing to hand over.
    "_get_pyclient_from_wrapper": "Mooncake's C++ client object",
    "MooncakeDistributedStore._get_pyclient_capsule": "Mooncake's C++ client object",
    # Addresses of C functions of Mooncake's host allocator (for torch's pluggable allocator)
    # and NUMA pinning of the calling thread: need C entry points kvtier's binding lacks.
    "get_alloc_func_addr": "C allocator entry points (needs a C++ binding change)",
    "get_free_func_addr": "C allocator entry points (needs a C++ binding change)",
    "bind_to_numa_node": "NUMA pinning (not offered)",
}

_DUNDER = re.compile(r"^__")  # Python's and pybind's own (__entries of its enums)
_PYBIND = {"_pybind11_conduit_v1_"}  # pybind11's own, on every pybind class


def _public(names):
    return sorted(n for n in names if not _DUNDER.match(n) and n not in _PYBIND)


def _kvtier_side():
    """dir() of kvtier's mooncake.store, its classes (and their instances where they take no
    arguments) and the parameters of every method, from a subprocess."""
    build_python = Path(kvtier.__file__).resolve().parents[1]
    compat = build_python.parent / "mooncake_compat"
    assert (compat / "mooncake" / "store.py").exists(), f"no {compat}: build kvtier first"
    script = r"""
import inspect, json
import mooncake, mooncake.store as m
assert mooncake.IS_KVTIER
out = {"module": dir(m), "classes": {}, "params": {}}
for name in dir(m):
    obj = getattr(m, name)
    if inspect.isclass(obj):
        names = set(dir(obj))
        try:
            names |= set(dir(next(iter(obj))) if hasattr(obj, "__members__") else vars(obj()))
        except Exception:
            pass
        out["classes"][name] = sorted(names)
for name in dir(m.MooncakeDistributedStore):
    fn = getattr(m.MooncakeDistributedStore, name)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # a native (pybind) method: its docstring has the signature
        out["params"][name] = getattr(fn, "__doc__", "") or ""
        continue
    out["params"][name] = [[p.name, p.kind.name, p.default is not inspect.Parameter.empty,
                            repr(p.default)] for p in sig.parameters.values()]
print(json.dumps(out))
"""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(compat), str(build_python)]))
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def kv():
    return _kvtier_side()


def _missing(wheel_names, kvtier_names, prefix=""):
    have = set(kvtier_names)
    return [prefix + n for n in _public(wheel_names)
            if n not in have and prefix + n not in ALLOWED_MISSING]


def test_module_names(kv):
    assert _missing(dir(wheel), kv["module"]) == []


def test_allow_list_names_only_what_the_wheel_has(kv):
    # An entry the wheel no longer has, or that kvtier now provides, must leave the list.
    for entry in ALLOWED_MISSING:
        owner, _, name = entry.rpartition(".")
        wheel_obj = getattr(wheel, owner) if owner else wheel
        assert hasattr(wheel_obj, name), f"{entry}: the wheel has no such name"
        kv_names = kv["classes"][owner] if owner else kv["module"]
        assert name not in kv_names, f"{entry}: kvtier provides it; drop it from the list"


def test_class_members(kv):
    missing = []
    for name in _public(dir(wheel)):
        obj = getattr(wheel, name)
        if not inspect.isclass(obj) or name in ALLOWED_MISSING:
            continue
        assert name in kv["classes"], f"{name} is not a class in kvtier's mooncake.store"
        missing += _missing(dir(obj), kv["classes"][name], prefix=f"{name}.")
    assert missing == []


_ENUM_SCRIPT = r"""
import json, sys
import mooncake.store as m
enums, members = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({
    "values": {n: {k: int(v) for k, v in getattr(m, n).__members__.items()} for n in enums},
    "module": {n: type(getattr(m, n)).__name__ + "." + getattr(m, n).name for n in members}}))
"""


def test_enum_values_match():
    enums = {name: {k: int(v) for k, v in getattr(wheel, name).__members__.items()}
             for name in _public(dir(wheel))
             if inspect.isclass(getattr(wheel, name)) and hasattr(getattr(wheel, name),
                                                                   "__members__")}
    # Members the module exports by name (pybind's export_values): FAILED is TaskStatus's.
    members = {n: type(getattr(wheel, n)).__name__ + "." + getattr(wheel, n).name
               for n in dir(wheel) if type(getattr(wheel, n)).__name__ in enums}
    build_python = Path(kvtier.__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(build_python.parent / "mooncake_compat"), str(build_python)]))
    out = subprocess.run([sys.executable, "-c", _ENUM_SCRIPT, json.dumps(sorted(enums)),
                          json.dumps(sorted(members))], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    ours = json.loads(out.stdout)
    assert ours["values"] == enums
    assert ours["module"] == members


def _wheel_params(doc, name):
    """[(name or None for argN, has_default, default text)] of the first signature line."""
    line = next(l for l in doc.splitlines() if l.lstrip("0123456789. ").startswith(name + "("))
    inner = line[line.index("(") + 1:line.rindex(") ->")]
    params, depth, cur = [], 0, ""
    for ch in inner:  # split on top-level commas (types hold brackets)
        if ch in "[(<":
            depth += 1
        elif ch in "])>":
            depth -= 1
        if ch == "," and depth == 0:
            params.append(cur.strip())
            cur = ""
        else:
            cur += ch
    params.append(cur.strip())
    out = []
    for p in params[1:]:  # self
        head, _, default = p.partition(" = ")
        pname = head.split(":")[0].strip()
        out.append((None if re.fullmatch(r"arg\d+", pname) else pname, bool(default), default))
    return out


def _same_default(wheel_default, kv_default):
    if wheel_default.startswith("<mooncake.store.ReplicateConfig"):
        return kv_default == "None"  # kvtier takes None for "a default ReplicateConfig"
    return wheel_default == kv_default


def test_store_method_signatures(kv):
    mismatches = []
    for name in _public(dir(wheel.MooncakeDistributedStore)):
        if f"MooncakeDistributedStore.{name}" in ALLOWED_MISSING or name == "setup":
            continue
        ours = kv["params"].get(name)
        if ours is None:
            mismatches.append(f"{name}: kvtier has no signature for it")
            continue
        if isinstance(ours, str):  # native: (name, kind, has default, default text)
            ours = [[n, "POSITIONAL_OR_KEYWORD", d, v if v else repr(inspect.Parameter.empty)]
                    for n, d, v in _wheel_params(ours, name)]
        ours = [p for p in ours if p[0] != "self"]
        theirs = _wheel_params(getattr(wheel.MooncakeDistributedStore, name).__doc__, name)
        if "*args" in [t[0] for t in theirs] or any(p[1] == "VAR_POSITIONAL" for p in ours):
            # put_parts / upsert_parts: key, then the parts, then config by keyword.
            kinds = [p[1] for p in ours]
            if kinds != ["POSITIONAL_OR_KEYWORD", "VAR_POSITIONAL", "KEYWORD_ONLY"]:
                mismatches.append(f"{name}: {ours}")
            continue
        if len(ours) != len(theirs):
            mismatches.append(f"{name}: kvtier {[p[0] for p in ours]} wheel {theirs}")
            continue
        for (pname, _, has_default, default), (tname, t_has_default, tdefault) in zip(
                ours, theirs):
            if tname is not None and pname != tname:
                mismatches.append(f"{name}: parameter {pname!r} is {tname!r} in the wheel")
            elif t_has_default and not (has_default and _same_default(tdefault, default)):
                mismatches.append(f"{name}({pname}): default {default} vs wheel's {tdefault}")
            elif has_default and not t_has_default and tname is not None:
                # kvtier may default more (setup_dummy's server_address); say so here.
                if (name, pname) not in _KVTIER_EXTRA_DEFAULTS:
                    mismatches.append(f"{name}({pname}): kvtier has a default, wheel none")
    assert mismatches == []


# Defaults kvtier adds where the wheel requires the argument: harmless for callers that pass it
# (the wheel's callers always do), documented in docs/store/python.md.
# load_tensor_from_safetensor: the wheel's file_name has no default after key's, which Python
# cannot spell; kvtier's None raises TypeError, as a missing argument does in the wheel.
_KVTIER_EXTRA_DEFAULTS = {("setup_dummy", "server_address"),
                          ("load_tensor_from_safetensor", "file_name")}


def test_setup_takes_the_wheels_arguments(kv):
    doc = wheel.MooncakeDistributedStore.setup.__doc__
    theirs = _wheel_params(doc.split("\n1. ", 1)[1], "setup")
    ours = [p[0] for p in kv["params"]["setup"] if p[0] != "self"]
    # kvtier appends one keyword of its own (auth_token_file) after the wheel's.
    assert ours[:len(theirs)] == [t[0] for t in theirs]
    assert ours[len(theirs):] == ["auth_token_file"]


# The installed engines' own Mooncake store clients (paths in site-packages). Every name they
# import from mooncake.store and every method they call on a store must be in kvtier's package.
ENGINE_CLIENTS = [
    "sglang/srt/mem_cache/storage/mooncake_store/mooncake_store.py",  # HiCache backend
    "vllm/distributed/kv_transfer/kv_connector/v1/mooncake/store/worker.py",  # MooncakeStore
    "vllm/distributed/ec_transfer/ec_connector/mooncake_store_embedding/store_client.py",
    "vllm/model_executor/model_loader/weight_cache/artifact_store.py",
    "lmcache/v1/storage_backend/connector/mooncakestore_connector.py",
    "lmcache/v1/lookup_client/mooncake_lookup_client.py",
]
# `store.x` or `self._store.x` (calls, and methods handed to threads), not `pkg.store.mod`.
_CALLS = re.compile(r"(?:(?<![\w.])|(?<=self\.))_?store\.([a-z_]+)\b")


def _engine_names(source):
    imported = set()
    for match in re.finditer(r"from mooncake\.store import (\([^)]*\)|[^\n]*)", source):
        text = re.sub(r"#[^\n]*", "", match.group(1)).strip("()")
        imported |= {n.strip().split(" as ")[0] for n in text.split(",") if n.strip()}
    return imported, set(_CALLS.findall(source))


def test_engine_clients_find_every_name_they_use(kv):
    site = Path(wheel.__file__).resolve().parents[1]
    missing = []
    for rel in ENGINE_CLIENTS:
        path = site / rel
        assert path.is_file(), f"{rel} is not in the installed engines"
        imported, called = _engine_names(path.read_text())
        assert imported, f"{rel}: no 'from mooncake.store import' found"
        missing += [f"{rel}: import {n}" for n in sorted(imported)
                    if n not in kv["module"] and n not in ALLOWED_MISSING]
        missing += [f"{rel}: store.{n}()" for n in sorted(called)
                    if n not in kv["classes"]["MooncakeDistributedStore"]]
    assert missing == []
