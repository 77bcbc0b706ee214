"""The ``*_with_parallelism`` tensor calls and the ParallelAxis / TensorParallelism / ReadTarget
types, the same calls against Mooncake's wheel and kvtier's package (test_mooncake_api_diff.py
has the fixtures): return codes, the keys and bytes each write leaves in the store (headers and
manifests byte for byte), and what each read target returns."""

import pytest
import torch

import mooncake.store as wheel
import kvtier.store as kv
from test_mooncake_api_diff import (  # noqa: F401 (fixtures)
    assert_same, dummy_pair, kvtier_cluster, pair, prefix, wheel_client,
    wheel_master)
from test_mooncake_api_pair import call, normalise

T = torch.arange(24, dtype=torch.float32).reshape(4, 6)


class Writer:
    """A writer partition as callers pass it: any object with rank, size and split_dim."""

    def __init__(self, rank, size, split_dim):
        self.rank, self.size, self.split_dim = rank, size, split_dim


def axis(mod, kind, rank, size, split=None, expert=None, stage=None):
    a = mod.ParallelAxis()
    a.kind, a.rank, a.size = kind, rank, size
    a.split_dim, a.expert_id, a.stage_id = split, expert, stage
    return a


def par(mod, *axes):
    p = mod.TensorParallelism()
    p.axes = list(axes)
    return p


def target(mod, mode, parallelism=None):
    t = mod.ReadTarget()
    t.mode = mode
    t.parallelism = parallelism
    return t


def stored(s, *keys):
    return [(k.rsplit("-", 1)[-1], call(s, "get", k)) for k in keys]


def single_tp(s, mem, p, mod):
    tp = lambda r, n, sd=0: par(mod, axis(mod, "tp", r, n, sd))  # noqa: E731
    out = [("put rank 0", call(s, "put_tensor_with_parallelism", f"{p}-w", T[:2], tp(0, 2))),
           ("put rank 1", call(s, "put_tensor_with_parallelism", f"{p}-w", T[2:] + 100,
                               tp(1, 2)))]
    out += stored(s, f"{p}-w_tp_0", f"{p}-w_tp_1", f"{p}-w__parallelism_manifest", f"{p}-w")
    get = lambda t: call(s, "get_tensor_with_parallelism", f"{p}-w", t)  # noqa: E731
    out += [("as stored (no object at the key)", get(None)),
            ("full without parallelism", get(target(mod, "full"))),
            ("full", get(target(mod, "full", tp(0, 2)))),
            ("shard 1 of 2", get(target(mod, "shard", tp(1, 2)))),
            ("shard 1 of 4 (cut)", get(target(mod, "shard", tp(1, 4)))),
            ("shard 3 of 4 (cut)", get(target(mod, "shard", tp(3, 4)))),
            ("shard 0 of 1 (joined)", get(target(mod, "shard", tp(0, 1)))),
            ("shard 1 of 3 (uneven)", get(target(mod, "shard", tp(1, 3)))),
            ("shard without parallelism", get(target(mod, "shard"))),
            ("as stored with parallelism", get(target(mod, "as_stored", tp(0, 2)))),
            ("upsert rank 0", call(s, "upsert_tensor_with_parallelism", f"{p}-w", T[:2] * 0,
                                   tp(0, 2))),
            ("after upsert", call(s, "get_tensor", f"{p}-w_tp_0"))]
    return out


def multi_axis(s, mem, p, mod):
    both = lambda r, n=2: par(mod, axis(mod, "tp", r, n, 1), axis(mod, "dp", 0, 2))  # noqa
    out = [("put tp 0", call(s, "put_tensor_with_parallelism", f"{p}-z", T, both(0))),
           ("put tp 1", call(s, "put_tensor_with_parallelism", f"{p}-z", T + 1, both(1)))]
    out += stored(s, f"{p}-z__dp_0of2__tp_0of2_sd1", f"{p}-z__dp_0of2__tp_1of2_sd1",
                  f"{p}-z__parallelism_manifest")
    get = lambda t: call(s, "get_tensor_with_parallelism", f"{p}-z", t)  # noqa: E731
    out += [("full", get(target(mod, "full", both(0)))),
            ("shard tp 0 of 3", get(target(mod, "shard", both(0, 3)))),
            ("shard tp 1 of 2", get(target(mod, "shard", both(1)))),
            ("shard other dp", get(target(mod, "shard", par(mod, axis(mod, "tp", 1, 2, 1),
                                                            axis(mod, "dp", 1, 2)))))]
    for kind, kwargs in (("dp", {}), ("pp", {"stage": 3}), ("ep", {"expert": 5})):
        spec = par(mod, axis(mod, kind, 1, 2, **kwargs))
        out.append((f"put {kind}", call(s, "put_tensor_with_parallelism", f"{p}-{kind}", T,
                                        spec)))
        suffix = {"dp": "", "pp": "_sid3", "ep": "_eid5"}[kind]
        out += stored(s, f"{p}-{kind}__{kind}_1of2{suffix}")
        out.append((f"read {kind}", call(s, "get_tensor_with_parallelism", f"{p}-{kind}",
                                         target(mod, "shard", spec))))
        out.append((f"full {kind}", call(s, "get_tensor_with_parallelism", f"{p}-{kind}",
                                         target(mod, "full", spec))))
    return out


def writer_partitions(s, mem, p, mod):
    rc = mod.ReplicateConfig()
    out = [(f"put rank {r}", call(s, "put_tensor_with_parallelism", f"{p}-x", T, None, rc,
                                  Writer(r, 2, 1))) for r in range(2)]
    out += stored(s, f"{p}-x__writer_0of2_sd1", f"{p}-x__writer_1of2_sd1",
                  f"{p}-x__writer_manifest")
    get = lambda t: call(s, "get_tensor_with_parallelism", f"{p}-x", t)  # noqa: E731
    out += [("as stored", get(None)),
            ("full", get(target(mod, "full"))),
            ("shard of the same slicing", get(target(mod, "shard", par(
                mod, axis(mod, "tp", 1, 2, 1))))),
            ("shard of another slicing", get(target(mod, "shard", par(
                mod, axis(mod, "tp", 1, 3, 1)))))]
    return out


def refused_writes(s, mem, p, mod):
    put = lambda *a: call(s, "put_tensor_with_parallelism", f"{p}-q", T, *a)  # noqa: E731
    rc = mod.ReplicateConfig()
    return [
        ("unknown kind", put(par(mod, axis(mod, "xx", 0, 2, 0)))),
        ("tp without split_dim", put(par(mod, axis(mod, "tp", 0, 2)))),
        ("rank not below size", put(par(mod, axis(mod, "tp", 2, 2, 0)))),
        ("negative rank", put(par(mod, axis(mod, "tp", -1, 2, 0)))),
        ("dp with split_dim", put(par(mod, axis(mod, "dp", 0, 2, 0)))),
        ("ep without expert_id", put(par(mod, axis(mod, "ep", 0, 2)))),
        ("pp without stage_id", put(par(mod, axis(mod, "pp", 0, 2)))),
        ("one kind twice", put(par(mod, axis(mod, "dp", 0, 2), axis(mod, "dp", 1, 2)))),
        ("no axes", put(par(mod))),
        ("split_dim past the dims", put(par(mod, axis(mod, "tp", 0, 2, 5)))),
        ("uneven multi-axis split", put(par(mod, axis(mod, "tp", 0, 4, 1),
                                            axis(mod, "dp", 0, 1)))),
        ("parallelism and writer", put(par(mod, axis(mod, "tp", 0, 2, 0)), rc,
                                       Writer(0, 2, 0))),
        ("uneven writer split", put(None, rc, Writer(0, 4, 1))),
        ("writer rank not below size", put(None, rc, Writer(2, 2, 0))),
        ("writer without split_dim", put(None, rc, object())),
        ("parallelism of another type", put(5)),
        ("nothing was stored", call(s, "is_exist", f"{p}-q")),
        ("no parallelism: put_tensor", put(None)),
        ("stored whole", call(s, "get", f"{p}-q")),
    ]


def batches(s, mem, p, mod):
    tp = par(mod, axis(mod, "tp", 0, 2, 0))
    rc = mod.ReplicateConfig()
    out = [("batch put", call(s, "batch_put_tensor_with_parallelism", [f"{p}-b1", f"{p}-b2"],
                              [T, T + 1], [tp, None])),
           ("batch put writers", call(s, "batch_put_tensor_with_parallelism", [f"{p}-b3"], [T],
                                      None, rc, [Writer(1, 2, 0)])),
           ("batch lengths differ", call(s, "batch_put_tensor_with_parallelism",
                                         [f"{p}-b4", f"{p}-b5"], [T])),
           ("batch parallelisms length differs", call(
               s, "batch_put_tensor_with_parallelism", [f"{p}-b4", f"{p}-b5"], [T, T], [None])),
           ("batch parallelisms not a list", call(s, "batch_put_tensor_with_parallelism",
                                                  [f"{p}-b4"], [T], tp)),
           ("batch empty", call(s, "batch_put_tensor_with_parallelism", [], [])),
           ("batch upsert", call(s, "batch_upsert_tensor_with_parallelism", [f"{p}-b2"],
                                 [T * 3])),
           ("stored", call(s, "batch_get_tensor", [f"{p}-b1_tp_0", f"{p}-b2",
                                                   f"{p}-b3__writer_1of2_sd0"])),
           ("batch get", call(s, "batch_get_tensor_with_parallelism", [f"{p}-b1", f"{p}-b2"])),
           ("batch get targets", call(s, "batch_get_tensor_with_parallelism",
                                      [f"{p}-b1", f"{p}-b2"],
                                      [target(mod, "shard", tp), None])),
           ("batch get one target for all", call(s, "batch_get_tensor_with_parallelism",
                                                 [f"{p}-b1"], target(mod, "full")))]
    return out


def from_buffers(s, mem, p, mod):
    mem.fill(0)
    assert s.put_tensor(f"{p}-src", T) == 0
    blob = s.get(f"{p}-src")
    mem.write(0, blob)
    base, n, rc = mem.ptr, len(blob), mod.ReplicateConfig()
    tp = par(mod, axis(mod, "tp", 1, 2, 0))
    out = [("from tp (every shard)", call(s, "put_tensor_with_parallelism_from", f"{p}-a",
                                          base, n, tp))]
    out += stored(s, f"{p}-a_tp_0", f"{p}-a_tp_1", f"{p}-a__parallelism_manifest")
    out += [("from writer", call(s, "put_tensor_with_parallelism_from", f"{p}-b", base, n,
                                 None, rc, Writer(1, 2, 0)))]
    out += stored(s, f"{p}-b__writer_1of2_sd0", f"{p}-b__writer_manifest")
    out += [("from plain", call(s, "put_tensor_with_parallelism_from", f"{p}-c", base, n)),
            ("from dp", call(s, "put_tensor_with_parallelism_from", f"{p}-d", base, n,
                             par(mod, axis(mod, "dp", 0, 2))))]
    out += stored(s, f"{p}-c", f"{p}-d__dp_0of2")
    out += [("from too small", call(s, "put_tensor_with_parallelism_from", f"{p}-e", base, 10)),
            ("from null", call(s, "put_tensor_with_parallelism_from", f"{p}-e", 0, n)),
            ("batch from", call(s, "batch_put_tensor_with_parallelism_from", [f"{p}-f", f"{p}-g"],
                                [base, base], [n, n], [par(mod, axis(mod, "dp", 0, 2)), None])),
            ("upsert from", call(s, "upsert_tensor_with_parallelism_from", f"{p}-c", base, n)),
            ("batch upsert from", call(s, "batch_upsert_tensor_with_parallelism_from",
                                       [f"{p}-c"], [base], [n]))]
    return out


def into_buffers(s, mem, p, mod):
    mem.fill(0)
    tp = lambda r, n: par(mod, axis(mod, "tp", r, n, 1))  # noqa: E731
    assert s.put_tensor_with_parallelism(f"{p}-g", T, tp(0, 2)) == 0
    assert s.put_tensor_with_parallelism(f"{p}-g", T + 1, tp(1, 2)) == 0
    assert s.put_tensor(f"{p}-c", T) == 0
    dst = mem.ptr + 4096
    out = []
    for label, key, t in (("shard", f"{p}-g", target(mod, "shard", tp(1, 2))),
                          ("cut shard", f"{p}-g", target(mod, "shard", tp(3, 4))),
                          ("full", f"{p}-g", target(mod, "full", tp(0, 2))),
                          ("as stored", f"{p}-c", None)):
        mem.fill(0)
        got = s.get_tensor_with_parallelism_into(key, dst, 8192, t)
        out.append((label, normalise(got)))
        out.append((f"{label}: bytes in the buffer", mem.read(4096, 304 + 4 * 48)))
        out.append((f"{label}: tensor views the buffer",
                    got is not None and got.data_ptr() == dst + 304))
    out += [("too small", call(s, "get_tensor_with_parallelism_into", f"{p}-c", dst, 100)),
            ("batch", call(s, "batch_get_tensor_with_parallelism_into", [f"{p}-c", f"{p}-g"],
                           [dst, dst + 65536], [8192, 8192],
                           [None, target(mod, "full", tp(0, 2))])),
            ("batch lengths differ", call(s, "batch_get_tensor_with_parallelism_into",
                                          [f"{p}-c", f"{p}-g"], [dst], [8192, 8192]))]
    return out


def test_single_tp_axis(pair, prefix):
    assert_same(pair, single_tp, prefix)


def test_several_axes_and_axes_without_tp(pair, prefix):
    assert_same(pair, multi_axis, prefix)


def test_writer_partitions(pair, prefix):
    assert_same(pair, writer_partitions, prefix)


def test_refused_writes(pair, prefix):
    assert_same(pair, refused_writes, prefix)


def test_batch_forms(pair, prefix):
    assert_same(pair, batches, prefix)


def test_from_registered_memory(pair, prefix):
    assert_same(pair, from_buffers, prefix)


def test_into_registered_memory(pair, prefix):
    assert_same(pair, into_buffers, prefix)


@pytest.mark.parametrize("scenario", [single_tp, multi_axis, writer_partitions, into_buffers],
                         ids=lambda f: f.__name__)
def test_dummy_clients(dummy_pair, pair, prefix, scenario):
    """kvtier's dummy client answers as Mooncake's embedded client does. Deliberate difference:
    the wheel's dummy client cannot join or cut shards ("failed to register reconstruction
    buffer": its real client lacks the RPC), so its "full" and cut reads return None (and a cut
    falls back to the rank's stored shard)."""
    (w_dummy, _), (k_dummy, k_mem) = dummy_pair
    (w_embedded, w_mem), _ = pair
    theirs = scenario(w_embedded, w_mem, f"{prefix}-e", wheel)
    ours = scenario(k_dummy, k_mem, f"{prefix}-e", kv)
    assert ours == theirs
    if scenario is single_tp:
        got = dict(scenario(w_dummy, None, f"{prefix}-d", wheel))
        assert got["full"] is None and got["shard 1 of 2"] == dict(theirs)["shard 1 of 2"]


def _types(mod):
    out = []
    a = mod.ParallelAxis()
    out.append(("axis defaults", (a.kind, a.rank, a.size, a.split_dim, a.expert_id, a.stage_id)))
    for field, value in (("kind", 1), ("kind", None), ("rank", None), ("rank", "1"),
                         ("size", 1.5), ("split_dim", None), ("split_dim", -1),
                         ("expert_id", "x"), ("stage_id", 2)):
        try:
            setattr(a, field, value)
            out.append((f"{field}={value!r}", ("set", getattr(a, field))))
        except Exception as e:
            out.append((f"{field}={value!r}", ("raises", type(e).__name__)))
    p = mod.TensorParallelism()
    out.append(("axes default", p.axes))
    p.axes = [mod.ParallelAxis()]
    p.axes.append(mod.ParallelAxis())  # a copy: the object keeps one axis
    out.append(("axes is a copy", len(p.axes)))
    for value in ([1], "a", None):
        try:
            p.axes = value
            out.append((f"axes={value!r}", "set"))
        except Exception as e:
            out.append((f"axes={value!r}", ("raises", type(e).__name__)))
    t = mod.ReadTarget()
    out.append(("target defaults", (t.mode, t.parallelism)))
    for value in ("FULL", "Shard", "as_stored", "as_written", 0):
        try:
            t.mode = value
            out.append((f"mode={value!r}", ("set", t.mode)))
        except Exception as e:
            out.append((f"mode={value!r}", ("raises", type(e).__name__)))
    return out


def test_types_behave_like_the_wheels():
    assert _types(wheel) == _types(kv)


@pytest.mark.parametrize("mode", ["as_stored", "shard", "full"])
def test_target_modes_are_the_wheels(mode):
    for mod in (wheel, kv):
        t = mod.ReadTarget()
        t.mode = mode.upper()
        assert t.mode == mode
