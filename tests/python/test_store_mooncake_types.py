"""Mooncake's typed classes on kvtier, without a store: ReplicateConfig's field types, the
parallelism types, and the keys and manifests of the *_with_parallelism calls byte for byte as
Mooncake's wheel writes them (the wheel itself is compared in tests/engines/)."""

import pytest

from kvtier.store import ReplicateConfig


def test_replicate_config_fields_are_typed_as_mooncakes():
    # A wrong type fails at the assignment, as with Mooncake's pybind class (checked against
    # the real wheel in tests/engines/test_mooncake_api_diff.py), not later inside a put.
    c = ReplicateConfig()
    for field, value in (("soft_pin_ttl_ms", "60000"), ("soft_pin_ttl_ms", 1.5),
                         ("soft_pin_ttl_ms", -1), ("replica_num", "2"), ("replica_num", -1),
                         ("with_hard_pin", "yes"), ("preferred_segments", "a"),
                         ("preferred_segments", [1]), ("preferred_segment", None),
                         ("soft_pin_action", 1), ("data_type", 3), ("group_ids", [1])):
        with pytest.raises(TypeError):
            setattr(c, field, value)
    c.soft_pin_ttl_ms, c.with_hard_pin, c.preferred_segments = 60000, 1, ("a:1",)
    assert (c.soft_pin_ttl_ms, c.with_hard_pin, c.preferred_segments) == (60000, True, ["a:1"])
    c.preferred_segments.append("b:2")  # a copy, as Mooncake's list property
    assert c.preferred_segments == ["a:1"]
    with pytest.raises(TypeError):
        ReplicateConfig(replica_num="1")


def test_parallelism_types_keys_and_manifests():
    from kvtier.store import ParallelAxis, ReadTarget, TensorParallelism
    from kvtier import store_parallel_spec as spec
    a = ParallelAxis()
    assert (a.kind, a.rank, a.size, a.split_dim, a.expert_id, a.stage_id) == (
        "", 0, 1, None, None, None)
    for field, value in (("kind", 1), ("rank", None), ("size", 1.5), ("expert_id", "x")):
        with pytest.raises(TypeError):
            setattr(a, field, value)
    p = TensorParallelism()
    p.axes = [a]
    p.axes.append(ParallelAxis())
    assert len(p.axes) == 1
    with pytest.raises(TypeError):
        p.axes = [1]
    t = ReadTarget()
    assert (t.mode, t.parallelism) == ("as_stored", None)
    t.mode = "FULL"
    assert t.mode == "full"
    with pytest.raises(RuntimeError):
        t.mode = "as_written"

    def axes(*specs):
        out = TensorParallelism()
        out.axes = [_axis(*s) for s in specs]
        return spec.parse_axes(out)

    def _axis(kind, rank, size, split=None, expert=None, stage=None):
        x = ParallelAxis()
        x.kind, x.rank, x.size, x.split_dim, x.expert_id, x.stage_id = (
            kind, rank, size, split, expert, stage)
        return x

    # Mooncake's key names (the same objects the wheel writes; see the engine suite).
    assert spec.shard_key("w", axes(("TP", 1, 2, 0))) == "w_tp_1"
    assert spec.shard_key("z", axes(("tp", 1, 2, 1), ("dp", 0, 2))) == "z__dp_0of2__tp_1of2_sd1"
    assert spec.shard_key("e", axes(("ep", 0, 2, None, 5))) == "e__ep_0of2_eid5"
    assert spec.shard_key("p", axes(("pp", 0, 2, None, None, 3))) == "p__pp_0of2_sid3"
    assert spec.writer_key("x", 0, 2, 1) == "x__writer_0of2_sd1"
    for bad in ((("xx", 0, 2, 0),), (("tp", 0, 2),), (("tp", 2, 2, 0),), (("dp", 0, 2, 0),),
                (("ep", 0, 2),), (("pp", 0, 2),), (("dp", 0, 2), ("dp", 1, 2)), ()):
        with pytest.raises(spec.SpecError):
            axes(*bad)
    # A manifest as Mooncake 0.3.13's wheel wrote it for a float32 (4, 6) split in 2 along 1.
    wheel = bytes.fromhex("4e414d57010060000000000002000000010000000200000000000000000000000"
                          "4000000000000000600000000000000") + b"\xff" * 48
    assert spec.pack_manifest(0, [4, 6], 1, 2) == wheel
    assert spec.unpack_manifest(wheel) == (0, [4, 6], 1, 2)
    assert spec.unpack_manifest(wheel[:-1]) is None
    assert spec.unpack_manifest(b"X" + wheel[1:]) is None
