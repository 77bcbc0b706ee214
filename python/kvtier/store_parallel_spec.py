"""The parallelism types of Mooncake's store API (ParallelAxis, TensorParallelism, ReadTarget)
and what the ``*_with_parallelism`` calls make of them: validated axis lists, the object keys
they name and the layout axes written into a tensor's header.

An axis is one of "tp", "dp", "ep", "pp" (any case) with a rank < size; a TP axis names the
dimension it splits (``split_dim``), an EP axis its ``expert_id``, a PP axis its ``stage_id``;
DP, EP and PP axes split nothing. A list holds each kind once, at most four. Keys and header
fields are Mooncake's, so shards written by either store are found and read by the other.
"""

import struct

_KINDS = {"dp": 0, "tp": 1, "ep": 2, "pp": 3}  # Mooncake's LayoutAxisKind codes
_KIND_NAMES = {code: name for name, code in _KINDS.items()}
_MAX_AXES = 4
_MODES = ("as_stored", "shard", "full")

# The manifest a sharded write leaves beside its shards: magic "NAMW", version, its own size,
# dtype code, ndim, split_dim, shard count, a reserved int, then the global shape (8 x int64,
# -1 past ndim). 96 bytes, little-endian, as Mooncake's WriterShardManifest.
MANIFEST = struct.Struct("<IHHiiiii4x" + "q" * 8)
_MANIFEST_MAGIC = 0x574D414E


def _int(value, what, optional=False):
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int{' or None' if optional else ''}, "
                        f"not {type(value).__name__}")
    return value


class ParallelAxis:
    """One axis of a tensor's parallel layout (Mooncake's ParallelAxis): ``kind`` ("tp", "dp",
    "ep", "pp"), ``rank`` of ``size``, and ``split_dim`` (TP), ``expert_id`` (EP) or
    ``stage_id`` (PP), None when unset. Fields are type-checked as Mooncake's are."""

    def __init__(self):
        self._kind, self._rank, self._size = "", 0, 1
        self._split_dim = self._expert_id = self._stage_id = None

    def _field(name, optional):  # noqa: N805 (a property factory used in the class body)
        def get(self):
            return getattr(self, "_" + name)

        def put(self, value):
            setattr(self, "_" + name, _int(value, f"ParallelAxis.{name}", optional))
        return property(get, put)

    rank = _field("rank", False)
    size = _field("size", False)
    split_dim = _field("split_dim", True)
    expert_id = _field("expert_id", True)
    stage_id = _field("stage_id", True)
    del _field

    @property
    def kind(self):
        return self._kind

    @kind.setter
    def kind(self, value):
        if not isinstance(value, str):
            raise TypeError(f"ParallelAxis.kind must be a str, not {type(value).__name__}")
        self._kind = value

    def __repr__(self):
        return (f"ParallelAxis(kind={self.kind!r}, rank={self.rank}, size={self.size}, "
                f"split_dim={self.split_dim}, expert_id={self.expert_id}, "
                f"stage_id={self.stage_id})")


class TensorParallelism:
    """A tensor's parallel layout: ``axes``, a list of ParallelAxis (reading it gives a copy
    of the list, as Mooncake's does: assign a new list to change it)."""

    def __init__(self):
        self._axes = []

    @property
    def axes(self):
        return list(self._axes)

    @axes.setter
    def axes(self, value):
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(a, ParallelAxis) for a in value):
            raise TypeError("TensorParallelism.axes must be a list of ParallelAxis")
        self._axes = list(value)

    def __repr__(self):
        return f"TensorParallelism(axes={self._axes!r})"


class ReadTarget:
    """What a ``get_tensor_with_parallelism`` call reads: ``mode`` "as_stored" (the object as
    written; the default), "shard" (the shard that ``parallelism`` names, cut from the stored
    shards when their count differs) or "full" (the whole tensor, joined from its shards).
    ``mode`` is kept in lower case; another value raises RuntimeError, as Mooncake's does."""

    def __init__(self):
        self._mode = "as_stored"
        self._parallelism = None

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, value):
        if not isinstance(value, str):
            raise TypeError(f"ReadTarget.mode must be a str, not {type(value).__name__}")
        if value.lower() not in _MODES:
            raise RuntimeError("Unsupported ReadTarget mode")
        self._mode = value.lower()

    @property
    def parallelism(self):
        return self._parallelism

    @parallelism.setter
    def parallelism(self, value):
        if value is not None and not isinstance(value, TensorParallelism):
            raise TypeError("ReadTarget.parallelism must be a TensorParallelism or None")
        self._parallelism = value

    def __repr__(self):
        return f"ReadTarget(mode={self.mode!r}, parallelism={self.parallelism!r})"


class SpecError(ValueError):
    """A parallelism, read target or writer partition the calls refuse (INVALID_PARAMS)."""


class Axis:
    """A validated axis: kind code, rank, size and the optional fields."""

    __slots__ = ("kind", "rank", "size", "split_dim", "expert_id", "stage_id")

    def __init__(self, kind, rank, size, split_dim=None, expert_id=None, stage_id=None):
        self.kind, self.rank, self.size = kind, rank, size
        self.split_dim, self.expert_id, self.stage_id = split_dim, expert_id, stage_id

    def fields(self):
        return (self.kind, self.rank, self.size, self.split_dim, self.expert_id, self.stage_id)

    def with_tp(self, rank, size, split_dim):
        return Axis(self.kind, rank, size, split_dim, self.expert_id, self.stage_id)

    def key_suffix(self):
        suffix = f"{_KIND_NAMES[self.kind]}_{self.rank}of{self.size}"
        for tag, value in (("sd", self.split_dim), ("eid", self.expert_id),
                           ("sid", self.stage_id)):
            if value is not None:
                suffix += f"_{tag}{value}"
        return suffix

    def layout(self, index, local_shape):
        """The 7 header fields of this axis at position `index` of a shard of `local_shape`."""
        extra = {2: self.expert_id, 3: self.stage_id}.get(self.kind)
        split = -1 if self.split_dim is None else self.split_dim
        extent = local_shape[self.split_dim] if self.split_dim is not None else 0
        return (self.kind, index, self.rank, self.size, split, extra or 0, extent)


TP = _KINDS["tp"]


def _attr(obj, name):
    if not hasattr(obj, name):
        raise SpecError(f"{type(obj).__name__} has no {name!r}")
    return getattr(obj, name)


def parse_axes(parallelism):
    """The validated Axis list of a TensorParallelism (or any object with ``axes`` of objects
    with kind/rank/size/split_dim/expert_id/stage_id). Raises SpecError."""
    axes = []
    for obj in list(_attr(parallelism, "axes")):
        kind = _attr(obj, "kind")
        code = _KINDS.get(kind.lower()) if isinstance(kind, str) else None
        if code is None:
            raise SpecError(f"unsupported parallel axis kind {kind!r}")
        try:
            axis = Axis(code, _int(_attr(obj, "rank"), "rank"), _int(_attr(obj, "size"), "size"),
                        *(_int(getattr(obj, n, None), n, True)
                          for n in ("split_dim", "expert_id", "stage_id")))
        except TypeError as e:
            raise SpecError(str(e)) from None
        axes.append(axis)
    if not axes:
        raise SpecError("parallelism axes cannot be empty")
    if len(axes) > _MAX_AXES:
        raise SpecError(f"at most {_MAX_AXES} parallel axes")
    if len({a.kind for a in axes}) != len(axes):
        raise SpecError("each axis kind may appear once")
    for a in axes:
        name = _KIND_NAMES[a.kind]
        if a.size <= 0 or not 0 <= a.rank < a.size:
            raise SpecError(f"invalid rank/size for axis {name}")
        if (a.kind == TP) != (a.split_dim is not None):
            raise SpecError("a TP axis requires split_dim" if a.kind == TP
                            else f"a {name.upper()} axis must not have split_dim")
        if a.kind == 2 and a.expert_id is None:
            raise SpecError("an EP axis requires expert_id")
        if a.kind == 3 and a.stage_id is None:
            raise SpecError("a PP axis requires stage_id")
    return axes


def parse_writer(writer):
    """(rank, size, split_dim) of a writer partition (an object with those attributes)."""
    try:
        rank, size, split = (_int(_attr(writer, n), n) for n in ("rank", "size", "split_dim"))
    except TypeError as e:
        raise SpecError(str(e)) from None
    if size <= 0 or not 0 <= rank < size or split < 0:
        raise SpecError("invalid writer partition")
    return rank, size, split


def parse_target(target):
    """(mode, Axis list or None) of a ReadTarget (None: as stored). Raises SpecError."""
    if target is None:
        return "as_stored", None
    mode = _attr(target, "mode")
    parallelism = _attr(target, "parallelism")
    if not isinstance(mode, str) or mode.lower() not in _MODES:
        raise SpecError(f"unsupported ReadTarget mode {mode!r}")
    return mode.lower(), None if parallelism is None else parse_axes(parallelism)


def canonical(axes):
    """The axes in Mooncake's key order: DP, TP, EP, PP."""
    return sorted(axes, key=lambda a: a.kind)


def tp_index(axes):
    return next((i for i, a in enumerate(axes) if a.kind == TP), None)


def is_single_tp(axes):
    return len(axes) == 1 and axes[0].kind == TP


def shard_key(base, axes):
    """Where a shard of `axes` is stored: ``{base}_tp_{rank}`` for one TP axis (the key of
    put_tensor_with_tp), else ``{base}__dp_0of2__tp_1of2_sd1``-style, axes in DP, TP, EP, PP
    order."""
    if is_single_tp(axes):
        return f"{base}_tp_{axes[0].rank}"
    return base + "".join("__" + a.key_suffix() for a in canonical(axes))


def writer_key(base, rank, size, split):
    return f"{base}__writer_{rank}of{size}_sd{split}"


def parallelism_manifest_key(base):
    return base + "__parallelism_manifest"


def writer_manifest_key(base):
    return base + "__writer_manifest"


def pack_manifest(dtype_code, global_shape, split, count):
    dims = list(global_shape) + [-1] * (8 - len(global_shape))
    return MANIFEST.pack(_MANIFEST_MAGIC, 1, MANIFEST.size, dtype_code, len(global_shape),
                         split, count, 0, *dims)


def unpack_manifest(raw):
    """(dtype code, global shape, split_dim, shard count) of a manifest, or None when `raw`
    is not one (as Mooncake checks it)."""
    if raw is None or len(raw) < MANIFEST.size:
        return None
    magic, version, size, dtype, ndim, split, count, _, *dims = MANIFEST.unpack_from(raw)
    if (magic, version, size) != (_MANIFEST_MAGIC, 1, MANIFEST.size) or not 0 <= ndim <= 8:
        return None
    shape = dims[:ndim]
    if count <= 0 or not 0 <= split < ndim or any(n <= 0 for n in shape):
        return None
    return dtype, shape, split, count


def axes_from_layout(layout_axes):
    """The canonical Axis list of a header's layout axes (7-tuples)."""
    out = []
    for kind, _, rank, count, split, reserved0, _ in layout_axes:
        if kind not in _KIND_NAMES:
            return None
        out.append(Axis(kind, rank, count, None if split < 0 else split,
                        reserved0 if kind == 2 else None, reserved0 if kind == 3 else None))
    return canonical(out)


def same_axes(requested, stored):
    """Whether two axis lists name the same shard (order aside)."""
    return stored is not None and [a.fields() for a in canonical(requested)] == [
        a.fields() for a in canonical(stored)]
