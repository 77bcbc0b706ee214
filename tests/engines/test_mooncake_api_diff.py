"""Differential tests: the same calls with the same arguments against Mooncake's own store
client (the installed wheel, on its own `mooncake_master`) and against kvtier's (on a real
`kvtier master` + `kvtier node`) give the same return codes, shapes and bytes, error cases
included. Each scenario is a function of (store, registered memory) returning labelled results;
the two lists must be equal, except where DIFFERS says why kvtier deliberately answers otherwise
(docs/mooncake-migration.md, "Where kvtier answers differently")."""

import re
import signal
import subprocess
import sys

import pytest
import torch

import mooncake.store as wheel
import kvtier.store as kv
from store_cluster import running_cluster
from test_mooncake_api_pair import (Memory, call, new_pair, setup_embedded,
                                    start_mooncake_client, start_mooncake_master)

LEASE_MS = 500

# label -> why kvtier's answer differs from the wheel's. The test asserts the difference is
# still there (a fixed one must leave this list) and checks kvtier's documented answer.
_OVERFLOW = ("kvtier answers BUFFER_OVERFLOW (-10), Mooncake's own code for a value larger "
             "than its destination; the wheel answers INVALID_PARAMS (-600). Both are negative "
             "and the engines test only the sign.")
DIFFERS = {
    "get_into dst too small": _OVERFLOW,
    "batch_get_into dst too small": _OVERFLOW,
    "multi get dst too small": _OVERFLOW,
    "multi get lengths differ": ("lists of different lengths are INVALID_PARAMS in kvtier; "
                                 "the wheel tries the transfer and answers TRANSFER_FAIL"),
    "put_tensor of a list": ("a non-tensor is a TypeError in kvtier; the wheel's AttributeError "
                             "comes from reading .shape of it"),
}
# Dummy clients (of Mooncake's mooncake_client and of a kvtier node): the wheel answers some
# calls differently from its embedded client, so the list differs.
DUMMY_DIFFERS = {
    "get_into dst too small": _OVERFLOW,
    "batch_get_into dst too small": _OVERFLOW,
    "multi get dst too small": _OVERFLOW,
    "put_tensor of a list": ("a non-tensor is a TypeError in kvtier; the wheel's dummy client "
                             "answers INVALID_PARAMS (its embedded one raises AttributeError)"),
}

# kvtier's answer where it differs (checked, so the documented behaviour cannot drift).
KVTIER_ANSWERS = {
    "get_into dst too small": -10,
    "batch_get_into dst too small": ("list", [4096, -10]),
    "multi get dst too small": ("list", [-10]),
    "multi get lengths differ": ("list", [-600]),
    "put_tensor of a list": ("raises", "TypeError"),
}


@pytest.fixture(scope="module")
def wheel_master():
    m = start_mooncake_master(LEASE_MS)
    yield m
    m.stop()
    m.remove_log()


@pytest.fixture(scope="module")
def kvtier_cluster():
    with running_cluster(LEASE_MS) as c:
        yield c


@pytest.fixture(scope="module")
def pair(wheel_master, kvtier_cluster):
    w, k = new_pair(wheel_master, kvtier_cluster)
    mems = Memory(w), Memory(k)
    yield (w, mems[0]), (k, mems[1])
    w.close()
    k.close()


_counter = iter(range(1 << 30))


@pytest.fixture
def prefix(request):
    # Fresh keys per test: both stores live for the whole module.
    return f"{re.sub(r'[^A-Za-z0-9]', '_', request.node.name)}-{next(_counter)}"


@pytest.fixture(scope="module")
def wheel_client(wheel_master):
    c = start_mooncake_client(wheel_master.address, "64MB")
    yield c
    c.stop()
    c.remove_log()


def new_dummy_pair(wheel_client, kvtier_cluster, local=16 << 20):
    w, k = wheel.MooncakeDistributedStore(), kv.MooncakeDistributedStore()
    assert w.setup_dummy(16 << 20, local, wheel_client.address) == 0, wheel_client.log_text()
    assert k.setup_dummy(16 << 20, local, kvtier_cluster.node_address) == 0
    return w, k


@pytest.fixture(scope="module")
def dummy_pair(wheel_client, kvtier_cluster):
    """(wheel dummy client of the wheel's mooncake_client, kvtier dummy client of the kvtier
    node), each with 1 MiB of its shared pool registered."""
    w, k = new_dummy_pair(wheel_client, kvtier_cluster)
    yield (w, Memory.from_pool(w)), (k, Memory.from_pool(k))
    w.close()
    k.close()


def run_both(pair, scenario, prefix):
    (w, wm), (k, km) = pair
    return scenario(w, wm, prefix, wheel), scenario(k, km, prefix, kv)


def assert_same(pair, scenario, prefix, differs=None, answers=None):
    differs = DIFFERS if differs is None else differs
    answers = KVTIER_ANSWERS if answers is None else answers
    theirs, ours = run_both(pair, scenario, prefix)
    assert [label for label, _ in theirs] == [label for label, _ in ours]
    diffs = [(label, t, o) for (label, t), (_, o) in zip(theirs, ours) if t != o]
    unexpected = [d for d in diffs if d[0] not in differs]
    assert unexpected == [], "\n".join(f"{l}: wheel {t!r} kvtier {o!r}" for l, t, o in unexpected)
    for label, _, answer in diffs:
        assert answer == answers[label], label
    # A difference that went away must leave DIFFERS (and the docs).
    stale = [label for label, t in theirs if label in differs and dict(ours)[label] == t]
    assert stale == [], f"no longer different: {stale}"


# ---- scenarios: (store, its registered Memory, key prefix, its mooncake.store module) ----

def basics(s, mem, p, mod):
    out = [("put", call(s, "put", f"{p}-a", b"hello world")),
           ("put again (first writer wins)", call(s, "put", f"{p}-a", b"other")),
           ("get", call(s, "get", f"{p}-a")),
           ("get missing", call(s, "get", f"{p}-none")),
           ("get_size", call(s, "get_size", f"{p}-a")),
           ("get_size missing", call(s, "get_size", f"{p}-none")),
           ("is_exist", call(s, "is_exist", f"{p}-a")),
           ("is_exist missing", call(s, "is_exist", f"{p}-none")),
           ("batch_is_exist", call(s, "batch_is_exist", [f"{p}-a", f"{p}-none"])),
           ("put empty value", call(s, "put", f"{p}-empty", b"")),
           ("put_batch", call(s, "put_batch", [f"{p}-b1", f"{p}-b2"], [b"1", b"22"])),
           ("put_batch lengths differ", call(s, "put_batch", [f"{p}-b3"], [b"1", b"2"])),
           ("get_batch", call(s, "get_batch", [f"{p}-b1", f"{p}-b2", f"{p}-none"])),
           ("remove missing", call(s, "remove", f"{p}-none")),
           ("batch_remove", call(s, "batch_remove", [f"{p}-b1", f"{p}-none"], True)),
           ("get_buffer", call(s, "get_buffer", f"{p}-b2")),
           ("get_buffer missing", call(s, "get_buffer", f"{p}-none")),
           ("batch_get_buffer", call(s, "batch_get_buffer", [f"{p}-b2", f"{p}-none"])),
           ("put_parts", call(s, "put_parts", f"{p}-parts", b"ab", b"cd")),
           ("get parts", call(s, "get", f"{p}-parts"))]
    return out


def registered_ranges(s, mem, p, mod):
    """put_from / get_into and the multi-buffer calls, with sources and destinations that do
    and do not fit."""
    mem.fill(0)
    mem.write(0, bytes(range(256)) * 16)  # 4096 known bytes
    base, out = mem.ptr, []
    out.append(("put_from", call(s, "put_from", f"{p}-x", base, 4096)))
    out.append(("get_into exact", call(s, "get_into", f"{p}-x", base + 8192, 4096)))
    out.append(("bytes", mem.read(8192, 4096) == mem.read(0, 4096)))
    out.append(("get_into larger dst", call(s, "get_into", f"{p}-x", base + 16384, 8192)))
    out.append(("get_into dst too small", call(s, "get_into", f"{p}-x", base + 16384, 100)))
    out.append(("get_into missing", call(s, "get_into", f"{p}-none", base + 16384, 4096)))
    out.append(("batch_get_into", call(s, "batch_get_into", [f"{p}-x", f"{p}-none"],
                                       [base + 20480, base + 24576], [4096, 4096])))
    out.append(("batch_get_into dst too small", call(s, "batch_get_into", [f"{p}-x", f"{p}-x"],
                                                     [base + 20480, base + 28672],
                                                     [4096, 10])))
    out.append(("batch_get_into lengths differ",
                call(s, "batch_get_into", [f"{p}-x"], [base, base], [4096])))
    out.append(("batch_put_from", call(s, "batch_put_from", [f"{p}-y", f"{p}-z"],
                                       [base, base + 100], [100, 200])))
    out.append(("batch_put_from lengths differ",
                call(s, "batch_put_from", [f"{p}-w"], [base], [1, 2])))
    out.append(("multi put", call(s, "batch_put_from_multi_buffers", [f"{p}-m"],
                                  [[base, base + 1000]], [[10, 20]])))
    out.append(("multi get exact", call(s, "batch_get_into_multi_buffers", [f"{p}-m"],
                                        [[base + 30000, base + 31000]], [[10, 20]])))
    out.append(("multi get dst too small", call(s, "batch_get_into_multi_buffers", [f"{p}-m"],
                                                [[base + 30000, base + 31000]], [[10, 5]])))
    out.append(("multi get lengths differ", call(s, "batch_get_into_multi_buffers",
                                                 [f"{p}-m"], [[base]], [[10, 20]])))
    out.append(("multi bytes", mem.read(30000, 10) + mem.read(31000, 20)))
    return out


def ranged_reads(s, mem, p, mod):
    """get_into_ranges and the session calls: ranges inside the object, past its end (an
    overflowing source), negative offsets."""
    mem.fill(0)
    mem.write(0, bytes(range(200)))
    base, out = mem.ptr, []
    out.append(("put_from", call(s, "put_from", f"{p}-r", base, 200)))
    out.append(("ranges", call(s, "get_into_ranges", [base + 4096], [[f"{p}-r"]],
                               [[[0, 50]]], [[[10, 100]]], [[[20, 30]]])))
    out.append(("range bytes", mem.read(4096, 20) + mem.read(4146, 30)))
    out.append(("range past the object", call(s, "get_into_ranges", [base + 4096],
                                              [[f"{p}-r"]], [[[0]]], [[[190]]], [[[20]]])))
    out.append(("range of a missing key", call(s, "get_into_ranges", [base + 4096],
                                               [[f"{p}-none"]], [[[0]]], [[[0]]], [[[20]]])))
    out.append(("ranges lengths differ", call(s, "get_into_ranges", [base + 4096, base],
                                              [[f"{p}-r"]], [[[0]]], [[[0]]], [[[20]]])))
    out.append(("get session", call(s, "batch_get_session_start", [f"{p}-r", f"{p}-none"])))
    out.append(("session range", call(s, "batch_get_into_multi_buffer_ranges", [f"{p}-r"],
                                      [[base + 8192]], [[16]], [[8]])))
    out.append(("session bytes", mem.read(8192, 16)))
    out.append(("session range past the end",
                call(s, "batch_get_into_multi_buffer_ranges", [f"{p}-r"], [[base + 8192]],
                     [[16]], [[190]])))
    out.append(("session range of a key without session",
                call(s, "batch_get_into_multi_buffer_ranges", [f"{p}-none"], [[base + 8192]],
                     [[16]], [[0]])))
    out.append(("get session end", call(s, "batch_get_session_end", [f"{p}-r"])))
    return out


def put_sessions(s, mem, p, mod):
    mem.fill(0)
    mem.write(0, bytes(range(100)))
    base, out = mem.ptr, []
    out.append(("start", call(s, "batch_put_session_start", [f"{p}-s", f"{p}-t"], [64, 32])))
    out.append(("start again", call(s, "batch_put_session_start", [f"{p}-s"], [64])))
    out.append(("start size 0", call(s, "batch_put_session_start", [f"{p}-u"], [0])))
    out.append(("write ranges", call(s, "batch_put_from_multi_buffer_ranges", [f"{p}-s"],
                                     [[base, base + 50]], [[32, 32]], [[0, 32]])))
    out.append(("write past the object (dst overflow)",
                call(s, "batch_put_from_multi_buffer_ranges", [f"{p}-s"], [[base]], [[40]],
                     [[30]])))
    out.append(("write without session", call(s, "batch_put_from_multi_buffer_ranges",
                                              [f"{p}-none"], [[base]], [[4]], [[0]])))
    out.append(("end", call(s, "batch_put_session_end", [f"{p}-s"])))
    out.append(("stored", call(s, "get", f"{p}-s")))
    out.append(("revoke", call(s, "batch_put_session_revoke", [f"{p}-t", f"{p}-none"])))
    out.append(("revoked is absent", call(s, "is_exist", f"{p}-t")))
    return out


def replicate_configs(s, mem, p, mod):
    """ReplicateConfig fields: soft-pin TTLs of the right and wrong types, hard pins, and the
    upsert of a pinned key."""
    out = []
    config = mod.ReplicateConfig()
    for label, value in (("int", 60000), ("None", None), ("str", "60000"), ("float", 1.5),
                         ("negative", -1)):
        try:
            config.soft_pin_ttl_ms = value
            out.append((f"soft_pin_ttl_ms {label}", ("set", config.soft_pin_ttl_ms)))
        except Exception as e:
            out.append((f"soft_pin_ttl_ms {label}", ("raises", type(e).__name__)))
    config = mod.ReplicateConfig()
    for field, value in (("replica_num", "2"), ("with_hard_pin", "yes"),
                         ("preferred_segments", "a"), ("soft_pin_action", 1)):
        try:
            setattr(config, field, value)
            out.append((f"{field}={value!r}", "set"))
        except Exception as e:
            out.append((f"{field}={value!r}", ("raises", type(e).__name__)))
    pinned = mod.ReplicateConfig()
    pinned.with_hard_pin = True
    out.append(("put hard-pinned", call(s, "put", f"{p}-pin", b"old", pinned)))
    out.append(("upsert pinned", call(s, "upsert", f"{p}-pin", b"new")))
    out.append(("after upsert", call(s, "get", f"{p}-pin")))
    out.append(("remove pinned", call(s, "remove", f"{p}-pin")))
    soft = mod.ReplicateConfig()
    soft.soft_pin_action = mod.SoftPinAction.ENABLE
    soft.soft_pin_ttl_ms = 1000
    out.append(("put soft-pinned", call(s, "put", f"{p}-soft", b"v", soft)))
    out.append(("upsert soft-pinned", call(s, "upsert", f"{p}-soft", b"w", soft)))
    out.append(("after soft upsert", call(s, "get", f"{p}-soft")))
    bad = mod.ReplicateConfig()
    bad.replica_num = 2
    bad.preferred_segments = ["127.0.0.1:1"]
    out.append(("preferred_segments fewer than replicas",
                call(s, "pub_tensor", f"{p}-t", torch.zeros(2), bad)))
    return out


def tensors(s, mem, p, mod):
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    out = [("put_tensor", call(s, "put_tensor", f"{p}-t", t)),
           ("stored bytes", call(s, "get", f"{p}-t")),
           ("get_tensor", call(s, "get_tensor", f"{p}-t")),
           ("get_tensor of plain bytes", (call(s, "put", f"{p}-raw", b"x" * 400),
                                          call(s, "get_tensor", f"{p}-raw"))),
           ("get_tensor missing", call(s, "get_tensor", f"{p}-none")),
           ("put_tensor of a list", call(s, "put_tensor", f"{p}-list", [1.0, 2.0])),
           ("batch_put_tensor", call(s, "batch_put_tensor", [f"{p}-b1", f"{p}-b2"],
                                     [t, t.to(torch.int8)])),
           ("batch_put_tensor lengths differ", call(s, "batch_put_tensor", [f"{p}-b3"],
                                                    [t, t])),
           ("batch_get_tensor", call(s, "batch_get_tensor", [f"{p}-b2", f"{p}-none"])),
           ("put_tensor_with_tp", call(s, "put_tensor_with_tp", f"{p}-tp", t, 0, 3, 1)),
           ("tp shards", [call(s, "get", f"{p}-tp_tp_{r}") for r in range(3)]),
           ("get_tensor_with_tp", call(s, "get_tensor_with_tp", f"{p}-tp", 2, 3)),
           ("upsert_tensor", call(s, "upsert_tensor", f"{p}-t", t * 2)),
           ("after upsert", call(s, "get_tensor", f"{p}-t"))]
    mem.fill(0)
    blob = bytes(call(s, "get", f"{p}-t"))
    mem.write(0, blob)
    out.append(("put_tensor_from", call(s, "put_tensor_from", f"{p}-from", mem.ptr, len(blob))))
    out.append(("put_tensor_from too small", call(s, "put_tensor_from", f"{p}-from2", mem.ptr,
                                                  100)))
    out.append(("get_tensor_into", call(s, "get_tensor_into", f"{p}-from", mem.ptr + 8192,
                                        4096)))
    out.append(("get_tensor_into dst too small", call(s, "get_tensor_into", f"{p}-from",
                                                      mem.ptr + 8192, 64)))
    return out


def hostnames(s, mem, p, mod):
    # Where this node's data plane listens: "127.0.0.1:<port>" in both.
    name = s.get_hostname()
    return [("get_hostname form", bool(re.fullmatch(r"127\.0\.0\.1:\d+", name))),
            ("port", 0 < int(name.rsplit(":", 1)[1]) < 65536)]


# ---- tests ----

def test_basics(pair, prefix):
    assert_same(pair, basics, prefix)


def test_registered_memory_and_buffer_overflows(pair, prefix):
    assert_same(pair, registered_ranges, prefix)


def test_ranged_reads_and_get_sessions(pair, prefix):
    assert_same(pair, ranged_reads, prefix)


def test_put_sessions(pair, prefix):
    assert_same(pair, put_sessions, prefix)


def test_replicate_config_and_pins(pair, prefix):
    assert_same(pair, replicate_configs, prefix)


def test_tensor_calls(pair, prefix):
    assert_same(pair, tensors, prefix)


def test_get_hostname(pair, prefix):
    assert_same(pair, hostnames, prefix)


def test_dummy_basics(dummy_pair, prefix):
    assert_same(dummy_pair, basics, prefix, DUMMY_DIFFERS)


def test_dummy_registered_memory_and_buffer_overflows(dummy_pair, prefix):
    assert_same(dummy_pair, registered_ranges, prefix, DUMMY_DIFFERS)


def test_dummy_ranged_reads_and_sessions(dummy_pair, pair, prefix):
    """Deliberate difference: the wheel's dummy client refuses the session calls
    (INVALID_PARAMS for every key); kvtier composes them of whole reads and writes, so its dummy
    client answers them as Mooncake's embedded client does, which is what is compared."""
    (w, _), (k, k_mem) = dummy_pair
    assert w.batch_get_session_start([f"{prefix}-x"]) == [-600]
    assert w.batch_put_session_start([f"{prefix}-x"], [8]) == [-600]
    (embedded, embedded_mem), _ = pair
    for scenario in (ranged_reads, put_sessions):
        theirs = scenario(embedded, embedded_mem, f"{prefix}-{scenario.__name__}", wheel)
        ours = scenario(k, k_mem, f"{prefix}-{scenario.__name__}", kv)
        assert ours == theirs


def test_dummy_tensor_calls(dummy_pair, prefix):
    assert_same(dummy_pair, tensors, prefix, DUMMY_DIFFERS)


def test_dummy_get_hostname(dummy_pair, kvtier_cluster):
    # Deliberate difference: the wheel's dummy client answers "" (it serves no data plane);
    # kvtier's answers the address of the node that serves it, so a preferred_segment taken
    # from it (LMCache's prefer_local_alloc) names this host's node.
    (w, _), (k, _) = dummy_pair
    assert (w.get_hostname(), k.get_hostname()) == ("", kvtier_cluster.node_address)


def test_zero_local_buffer(wheel_master, kvtier_cluster, prefix):
    """An embedded client set up with local_buffer_size 0. Deliberate difference: the wheel
    stages put's bytes through that buffer, so its put answers INVALID_PARAMS and its tensors do
    not read back; kvtier's embedded node writes values straight into its segment (the
    local buffer is used only by dummy clients), so both succeed and read back."""
    w, k = new_pair(wheel_master, kvtier_cluster, local=0)
    try:
        def calls(s):
            return [call(s, "put", f"{prefix}-z", b"abc"), call(s, "get", f"{prefix}-z"),
                    call(s, "put_tensor", f"{prefix}-t", torch.ones(3)),
                    call(s, "get_tensor", f"{prefix}-t")]
        theirs = calls(w)
        # The wheel's put_tensor answers NO_AVAILABLE_HANDLE or 0 from run to run; either way
        # the tensor does not read back.
        assert theirs[:2] == [-600, b""] and theirs[2] in (0, -200) and theirs[3] is None
        ours = calls(k)
        assert ours[:3] == [0, b"abc", 0] and ours[3][2] == (3,)
    finally:
        w.close()
        k.close()


def test_dummy_zero_local_buffer(wheel_client, kvtier_cluster, prefix):
    """Dummy clients with local_buffer_size 0. Deliberate difference: the wheel's put answers
    INVALID_PARAMS and its get reads nothing; kvtier's dummy stages the bytes calls in the area
    of its multi-buffer calls (docs/store/python.md), so they work."""
    w, k = new_dummy_pair(wheel_client, kvtier_cluster, local=0)
    try:
        assert [call(w, "put", f"{prefix}-z", b"abc"), call(w, "get", f"{prefix}-z")] == [
            -600, b""]
        assert [call(k, "put", f"{prefix}-z", b"abc"), call(k, "get", f"{prefix}-z")] == [
            0, b"abc"]
    finally:
        w.close()
        k.close()


def test_calls_before_setup():
    # Deliberate difference: the wheel's client dies with SIGSEGV on a data call before setup
    # (so it runs in a subprocess here); kvtier's returns RPC_FAIL (-900), b"" or None.
    proc = subprocess.run([sys.executable, "-c", "import mooncake.store as m\n"
                           "m.MooncakeDistributedStore().put('k', b'v')"],
                          capture_output=True, timeout=120)
    assert proc.returncode == -signal.SIGSEGV, proc.stderr[-2000:]
    s = kv.MooncakeDistributedStore()
    rpc_fail = int(kv.ErrorCode.RPC_FAIL)
    assert [call(s, "put", "k", b"v"), call(s, "get", "k"), call(s, "is_exist", "k"),
            call(s, "batch_is_exist", ["k"]), call(s, "get_size", "k"), call(s, "remove", "k"),
            call(s, "put_tensor", "k", torch.ones(2)), call(s, "get_tensor", "k")] == [
        rpc_fail, b"", rpc_fail, ("list", [rpc_fail]), rpc_fail, rpc_fail, rpc_fail, None]


def test_tensor_bytes_cross_between_the_stores(pair, prefix):
    """A tensor put by one store reads back through the other's get_tensor once its bytes are
    moved across (get / get_buffer from one, put into the other): the header is Mooncake's."""
    (w, _), (k, _) = pair
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.float16):
        t = (torch.arange(60) % 7).reshape(3, 4, 5).to(dtype)
        assert w.put_tensor(f"{prefix}-w-{dtype}", t) == 0
        assert k.put(f"{prefix}-w-{dtype}", w.get(f"{prefix}-w-{dtype}")) == 0
        assert torch.equal(k.get_tensor(f"{prefix}-w-{dtype}"), t)
        assert k.put_tensor(f"{prefix}-k-{dtype}", t) == 0
        handle = k.get_buffer(f"{prefix}-k-{dtype}")
        assert w.put(f"{prefix}-k-{dtype}", memoryview(handle)) == 0
        got = w.get_tensor(f"{prefix}-k-{dtype}")
        assert got.dtype == dtype and torch.equal(got, t)
        assert w.get(f"{prefix}-k-{dtype}") == w.get(f"{prefix}-w-{dtype}")  # same bytes
    shard = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert w.put_tensor_with_tp(f"{prefix}-tp", shard, 0, 2, 1) == 0
    for r in range(2):
        assert k.put(f"{prefix}-tp_tp_{r}", w.get(f"{prefix}-tp_tp_{r}")) == 0
        assert torch.equal(k.get_tensor_with_tp(f"{prefix}-tp", r, 2),
                           w.get_tensor_with_tp(f"{prefix}-tp", r, 2))


def test_buffer_handle_memory(pair, prefix):
    """get_buffer's BufferHandle: the same bytes, length, format ("b") and writability through
    the buffer protocol."""
    (w, _), (k, _) = pair
    views = []
    for s in (w, k):
        assert s.put(f"{prefix}-h", b"\x01\xff\x80") == 0
        handle = s.get_buffer(f"{prefix}-h")
        view = memoryview(handle)
        views.append((view.cast("B").tobytes(), view.nbytes, handle.size(), view.readonly,
                      view.format))
    assert views[0] == (b"\x01\xff\x80", 3, 3, False, "b")
    assert views[1] == views[0]
