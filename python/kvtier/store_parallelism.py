"""Mooncake's ``*_with_parallelism`` tensor calls on kvtier.store, composed of put/get.

Writes (put_tensor_with_parallelism and its upsert, ``_from`` and batch forms) store what
Mooncake stores, under the same keys with the same headers (store_parallel_spec.py):
- no parallelism and no writer partition: the tensor whole under ``key`` (put_tensor);
- one TP axis: the tensor is this rank's shard, stored as ``{key}_tp_{rank}`` with a header
  whose global shape is the shard's times the TP size along ``split_dim``, and a manifest at
  ``{key}__parallelism_manifest``; the ``_from`` forms instead read a full tensor and store all
  of its shards, as put_tensor_with_tp_from does;
- several axes with a TP one: the tensor is the full tensor; this rank's TP slice (the split
  dimension must divide evenly) is stored under the axes' key, with the manifest;
- axes without TP (DP, EP, PP): the tensor whole under the axes' key, no manifest;
- a writer partition (``rank``, ``size``, ``split_dim``): the full tensor's slice for that
  rank as ``{key}__writer_{rank}of{size}_sd{split_dim}``, and ``{key}__writer_manifest``.
Reads (get_tensor_with_parallelism and its forms) take a ReadTarget: "as_stored" (the object
at ``key``), "shard" (the stored shard that matches, else one cut from the TP shards the
manifest lists when the requested TP size divides the dimension), "full" (the shards the
manifest lists, joined; without parallelism: ``key`` itself or the writer shards).
Write errors return INVALID_PARAMS (logged); read errors return None.
"""

import ctypes
import logging

from kvtier.safetensors_file import import_torch
from kvtier.store_parallel_spec import (
    TP, SpecError, axes_from_layout, is_single_tp, pack_manifest, parallelism_manifest_key,
    parse_axes, parse_target, parse_writer, same_axes, shard_key, tp_index, unpack_manifest,
    writer_key, writer_manifest_key)
from kvtier.store_tensors import (_HEADER, _SHARD, _config_ok, _dtypes, _parse, _deserialize,
                                  _serialize, _shard_values, _tensor_at)

_log = logging.getLogger("kvtier.store")
_INVALID_PARAMS = -600


class _Stored:
    """A serialized tensor read back: its raw bytes, tensor and header fields."""

    def __init__(self, raw):
        fields = _HEADER.unpack_from(raw)
        ndim = fields[4]
        self.raw = raw
        self.code, self.layout = fields[3], fields[5]
        self.global_shape = list(fields[9:9 + ndim])
        self.axes = axes_from_layout(
            [fields[27 + 7 * i:34 + 7 * i] for i in range(fields[25])])
        self.tensor = _deserialize(raw)


def _tensor_or_raise(tensor):
    if not isinstance(tensor, import_torch().Tensor):
        raise TypeError(f"expected a torch.Tensor, not {type(tensor).__name__}")
    return tensor


def _code(tensor):
    code = _dtypes()[1].get(tensor.dtype)
    if code is None:
        raise SpecError(f"dtype {tensor.dtype} has no Mooncake TensorDtype code")
    return code


def _slice(tensor, split, rank, count):
    """Rank `rank` of `count` even slices of `tensor` along `split`; SpecError when uneven."""
    if not 0 <= split < tensor.dim():
        raise SpecError(f"split_dim {split} is not a dimension of a {tensor.dim()}-d tensor")
    if tensor.shape[split] % count:
        raise SpecError("only uniform sharding is supported")
    chunk = tensor.shape[split] // count
    return tensor.narrow(split, rank * chunk, chunk).contiguous()


def _writer_plan(key, tensor, writer):
    rank, size, split = writer
    shard = _slice(tensor, split, rank, size)
    layout = [(TP, 0, rank, size, split, 0, shard.shape[split])]
    return [(writer_key(key, rank, size, split), _serialize(shard, tensor.shape, axes=layout)),
            (writer_manifest_key(key), pack_manifest(_code(tensor), tensor.shape, split, size))]


def _parallel_plan(key, tensor, axes):
    """[(key, value)] that a write of `tensor` with `axes` stores, in order."""
    ti = tp_index(axes)
    if ti is None:
        layout = [a.layout(i, tensor.shape) for i, a in enumerate(axes)]
        return [(shard_key(key, axes), _serialize(tensor, tensor.shape, axes=layout))]
    tp = axes[ti]
    if is_single_tp(axes):  # the tensor is this rank's shard
        if not 0 <= tp.split_dim < tensor.dim():
            raise SpecError(f"split_dim {tp.split_dim} is not a dimension of the tensor")
        shard, global_shape = tensor, list(tensor.shape)
        global_shape[tp.split_dim] *= tp.size
    else:  # the tensor is the full one
        shard, global_shape = _slice(tensor, tp.split_dim, tp.rank, tp.size), list(tensor.shape)
    layout = [a.layout(i, shard.shape) for i, a in enumerate(axes)]
    manifest = pack_manifest(_code(tensor), global_shape, tp.split_dim, tp.size)
    return [(shard_key(key, axes), _serialize(shard, global_shape, axes=layout)),
            (parallelism_manifest_key(key), manifest)]


def _same_length_or_none(values, n):
    """`values` as a list of n, [None] * n for None; None when it is not a list of n."""
    if values is None:
        return [None] * n
    return values if isinstance(values, list) and len(values) == n else None


class ParallelismCalls:
    """Mixed into kvtier.store.DistributedStore (needs put, upsert, get, _store)."""

    # ---- writes ----

    def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                    writer_partition=None):
        """Stores `tensor` as the shard `parallelism` names, or as the writer partition's
        slice (see the module doc). 0 or a negative ErrorCode (INVALID_PARAMS for a bad
        parallelism or partition, or both given)."""
        return self._write_parallel("put_tensor_with_parallelism", False, key, tensor,
                                    parallelism, config, writer_partition)

    def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                       writer_partition=None):
        """put_tensor_with_parallelism that replaces what is stored (upsert)."""
        return self._write_parallel("upsert_tensor_with_parallelism", True, key, tensor,
                                    parallelism, config, writer_partition)

    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                         config=None, writer_partition=None):
        """put_tensor_with_parallelism of the serialized full tensor at `buffer_ptr` (`size`
        bytes). With one TP axis every shard is stored (put_tensor_with_tp_from)."""
        return self._write_parallel_from("put_tensor_with_parallelism_from", False, key,
                                         buffer_ptr, size, parallelism, config,
                                         writer_partition)

    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                            config=None, writer_partition=None):
        """put_tensor_with_parallelism_from that replaces what is stored (upsert)."""
        return self._write_parallel_from("upsert_tensor_with_parallelism_from", True, key,
                                         buffer_ptr, size, parallelism, config,
                                         writer_partition)

    def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                          config=None, writer_partitions=None):
        """put_tensor_with_parallelism of each: a list of 0 / negative ErrorCode; every entry
        INVALID_PARAMS when the lists (parallelisms, writer_partitions: a list or None)
        differ in length."""
        return self._batch_parallel(self.put_tensor_with_parallelism, keys, [tensors_list],
                                    parallelisms, config, writer_partitions)

    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                             config=None, writer_partitions=None):
        """upsert_tensor_with_parallelism of each (see batch_put_tensor_with_parallelism)."""
        return self._batch_parallel(self.upsert_tensor_with_parallelism, keys, [tensors_list],
                                    parallelisms, config, writer_partitions)

    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None,
                                               config=None, writer_partitions=None):
        """put_tensor_with_parallelism_from of each (see batch_put_tensor_with_parallelism)."""
        return self._batch_parallel(self.put_tensor_with_parallelism_from, keys,
                                    [buffer_ptrs, sizes], parallelisms, config,
                                    writer_partitions)

    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                                  parallelisms=None, config=None,
                                                  writer_partitions=None):
        """upsert_tensor_with_parallelism_from of each."""
        return self._batch_parallel(self.upsert_tensor_with_parallelism_from, keys,
                                    [buffer_ptrs, sizes], parallelisms, config,
                                    writer_partitions)

    # ---- reads ----

    def get_tensor_with_parallelism(self, key, target=None):
        """The tensor `target` (a ReadTarget; None: as stored) names, or None."""
        found = self._read_parallel("get_tensor_with_parallelism", key, target)
        return None if found is None else found[0]

    def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
        """get_tensor_with_parallelism written serialized ([header][payload]) to `buffer_ptr`
        (`size` bytes): a tensor viewing that memory, or None (also when it does not fit)."""
        found = self._read_parallel("get_tensor_with_parallelism_into", key, target)
        if found is None:
            return None
        blob = bytes(found[1])
        if not buffer_ptr or len(blob) > size:
            _log.error("get_tensor_with_parallelism_into: buffer too small for key %s", key)
            return None
        ctypes.memmove(buffer_ptr, blob, len(blob))
        return _tensor_at(buffer_ptr, len(blob))

    def batch_get_tensor_with_parallelism(self, keys, targets=None):
        """get_tensor_with_parallelism of each (`targets`: a list of ReadTarget / None, or
        None); every entry None when `targets` is not a list of len(keys)."""
        targets = _same_length_or_none(targets, len(keys))
        if targets is None:
            return [None] * len(keys)
        return [self.get_tensor_with_parallelism(k, t) for k, t in zip(keys, targets)]

    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None):
        """get_tensor_with_parallelism_into of each; every entry None when the lists differ in
        length."""
        targets = _same_length_or_none(targets, len(keys))
        if targets is None or not len(keys) == len(buffer_ptrs) == len(sizes):
            return [None] * len(keys)
        return [self.get_tensor_with_parallelism_into(k, p, n, t)
                for k, p, n, t in zip(keys, buffer_ptrs, sizes, targets)]

    # ---- shared ----

    def _write_parallel(self, what, upsert, key, tensor, parallelism, config, writer):
        put = self.upsert if upsert else self.put
        try:
            if parallelism is not None and writer is not None:
                raise SpecError("writer_partition cannot be combined with parallelism")
            if writer is not None:
                plan = _writer_plan(key, _tensor_or_raise(tensor), parse_writer(writer))
            elif parallelism is None:
                return self._store(put, key, tensor, config)
            else:
                plan = _parallel_plan(key, _tensor_or_raise(tensor), parse_axes(parallelism))
        except (SpecError, ValueError) as e:
            return _refused(what, e)
        if not _config_ok(config):
            return _INVALID_PARAMS
        for shard, value in plan:
            code = put(shard, value, config)
            if code != 0:
                return code
        return 0

    def _write_parallel_from(self, what, upsert, key, buffer_ptr, size, parallelism, config,
                             writer):
        tensor = _tensor_at(buffer_ptr, size)
        if tensor is None:
            return _refused(what, SpecError("the buffer holds no serialized tensor"))
        if parallelism is not None and writer is None:
            try:
                axes = parse_axes(parallelism)
            except SpecError as e:
                return _refused(what, e)
            if is_single_tp(axes):
                return self._all_tp_shards(upsert, key, tensor, axes[0], config)
        return self._write_parallel(what, upsert, key, tensor, parallelism, config, writer)

    def _all_tp_shards(self, upsert, key, tensor, axis, config):
        put = self.upsert if upsert else self.put
        values = _shard_values(tensor, axis.size, axis.split_dim)
        if values is None or not _config_ok(config):
            return _INVALID_PARAMS
        codes = [put(f"{key}_tp_{r}" if axis.size > 1 else key, v, config)
                 for r, v in enumerate(values)]
        return next((c for c in codes if c != 0), 0)

    @staticmethod
    def _batch_parallel(one, keys, columns, parallelisms, config, writers):
        n = len(keys)
        if any(len(c) != n for c in columns):
            return [_INVALID_PARAMS] * n
        if n == 0:
            return []
        parallelisms = _same_length_or_none(parallelisms, n)
        writers = _same_length_or_none(writers, n)
        if parallelisms is None or writers is None:
            return [_INVALID_PARAMS] * n
        return [one(k, *row, parallelism=p, config=config, writer_partition=w)
                for k, *row, p, w in zip(keys, *columns, parallelisms, writers)]

    def _load(self, key):
        raw = self.get(key)
        if not raw or _parse(memoryview(raw)) is None:
            return None
        return _Stored(raw)

    def _read_parallel(self, what, key, target):
        """(tensor, its serialized bytes) that `target` names, or None."""
        try:
            mode, axes = parse_target(target)
        except SpecError as e:
            _log.error("%s: %s", what, e)
            return None
        if mode == "as_stored":
            return None if axes is not None else self._whole(key)
        if mode == "full":
            if axes is None:
                return self._whole(key) or self._join(key, None)
            return self._join(key, axes)
        return None if axes is None else self._shard(key, axes)

    def _whole(self, key):
        stored = self._load(key)
        return None if stored is None else (stored.tensor, stored.raw)

    def _manifest(self, key, axes):
        raw = self.get(writer_manifest_key(key) if axes is None else
                       parallelism_manifest_key(key))
        return unpack_manifest(raw or None)

    def _sources(self, key, axes, manifest, ranks):
        """The stored TP shards `ranks` of the manifest, or None when one is missing or does
        not belong to it."""
        code, global_shape, split, count = manifest
        ti = None if axes is None else tp_index(axes)
        out = []
        for r in ranks:
            if axes is None:
                name = writer_key(key, r, count, split)
            else:
                shard_axes = list(axes)
                shard_axes[ti] = axes[ti].with_tp(r, count, split)
                name = shard_key(key, shard_axes)
            stored = self._load(name)
            if stored is None or stored.code != code or stored.global_shape != global_shape:
                _log.error("missing shard %s of %s", name, key)
                return None
            out.append(stored.tensor)
        return out

    def _join(self, key, axes):
        """The full tensor from the shards of the manifest (the writer manifest when `axes` is
        None)."""
        if axes is not None and tp_index(axes) is None:
            return None
        manifest = self._manifest(key, axes)
        if manifest is None:
            return None
        parts = self._sources(key, axes, manifest, range(manifest[3]))
        if parts is None:
            return None
        full = import_torch().cat(parts, dim=manifest[2]).contiguous()
        return (full, _serialize(full)) if list(full.shape) == manifest[1] else None

    def _shard(self, key, axes):
        stored = self._load(shard_key(key, axes))
        if stored is not None and stored.layout == _SHARD and same_axes(axes, stored.axes):
            return stored.tensor, stored.raw
        if is_single_tp(axes):  # a writer partition of the same slicing
            a = axes[0]
            stored = self._load(writer_key(key, a.rank, a.size, a.split_dim))
            if stored is not None and same_axes(axes, stored.axes):
                return stored.tensor, stored.raw
        found = self._reshard(key, axes)
        if found is None and is_single_tp(axes):
            # As Mooncake: when no cut fits, the object at the rank's legacy key
            # ({key}_tp_{rank}, put_tensor_with_tp's) is returned as it is.
            return self._whole(shard_key(key, axes))
        return found

    def _reshard(self, key, axes):
        """The requested TP shard cut from the stored shards of another TP size."""
        ti = tp_index(axes)
        manifest = None if ti is None else self._manifest(key, axes)
        if manifest is None:
            return None
        _, global_shape, split, count = manifest
        tp = axes[ti]
        extent = global_shape[split]
        if tp.split_dim != split or extent % tp.size or extent % count:
            _log.error("get_tensor_with_parallelism: %s cannot be cut from the stored shards",
                       key)
            return None
        want, chunk = extent // tp.size, extent // count
        start, end = tp.rank * want, (tp.rank + 1) * want
        ranks = range(start // chunk, -(-end // chunk))
        parts = self._sources(key, axes, manifest, ranks)
        if parts is None:
            return None
        pieces = [t.narrow(split, max(start, r * chunk) - r * chunk,
                           min(end, (r + 1) * chunk) - max(start, r * chunk))
                  for r, t in zip(ranks, parts)]
        shard = import_torch().cat(pieces, dim=split).contiguous()
        layout = [a.layout(i, shard.shape) for i, a in enumerate(axes)]
        return shard, _serialize(shard, global_shape, axes=layout)


def _refused(what, error):
    _log.error("%s: %s", what, error)
    return _INVALID_PARAMS
