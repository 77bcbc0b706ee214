"""Mooncake's ranged and session calls on kvtier.store, composed of the whole-object ones.

Mooncake reads and writes byte ranges of an object in place; the kvtier data plane moves whole
objects, so these calls go through a copy: a get session (or ``get_into_ranges``) reads each
object once into a ``BufferHandle`` and copies the ranges out of it; a put session assembles the
object in memory from its ranges and stores it whole at ``batch_put_session_end``. Results and
error codes are Mooncake's. Destination buffers are written with ``ctypes.memmove``: the caller
guarantees they are as large as the ranges it names (as with registered memory in Mooncake).
"""

import ctypes
import threading

_INVALID_PARAMS = -600
_OBJECT_NOT_FOUND = -704
_OBJECT_ALREADY_EXISTS = -705


def _address(buffer):
    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


def _fits(offset, size, total):
    return offset >= 0 and size >= 0 and offset + size <= total


def _copy_ranges(dst_ptrs, sizes, src_ptrs):
    for dst, size, src in zip(dst_ptrs, sizes, src_ptrs):
        if size:
            ctypes.memmove(dst, src, size)


def _ranged_copies(objects, all_buffer_ptrs, all_sizes, all_offsets, into):
    """The ranged multi-buffer calls: per key, copies its buffers' ranges into (or out of) the
    object at (address, size), or None where the key has no session. Per key the bytes copied,
    or INVALID_PARAMS (no session, a range outside the object, lists that do not match)."""
    if not len(objects) == len(all_buffer_ptrs) == len(all_sizes) == len(all_offsets):
        return [_INVALID_PARAMS] * len(objects)
    out = []
    for obj, ptrs, sizes, offsets in zip(objects, all_buffer_ptrs, all_sizes, all_offsets):
        if (obj is None or not len(ptrs) == len(sizes) == len(offsets)
                or not all(_fits(o, n, obj[1]) for o, n in zip(offsets, sizes))):
            out.append(_INVALID_PARAMS)
            continue
        places = [obj[0] + o for o in offsets]
        if into:
            _copy_ranges(places, sizes, ptrs)
        else:
            _copy_ranges(ptrs, sizes, places)
        out.append(sum(sizes))
    return out


class RangeCalls:
    """Mixed into kvtier.store.DistributedStore (needs batch_get_buffer, put, is_exist)."""

    def _sessions(self):
        # Created on first use: the native base class owns __init__.
        state = self.__dict__.get("_range_sessions")
        if state is None:
            state = self.__dict__.setdefault(
                "_range_sessions", {"lock": threading.Lock(), "put": {}, "get": {}})
        return state

    def _open_sessions(self, side, keys):
        state = self._sessions()
        with state["lock"]:
            return [state[side].get(k) for k in keys]

    # ---- get side ----

    def get_into_ranges(self, buffer_ptrs, all_keys, all_dst_offsets, all_src_offsets,
                        all_sizes):
        """For each buffer i, key j and fragment k, copies ``all_sizes[i][j][k]`` bytes of key
        ``all_keys[i][j]`` from ``all_src_offsets[i][j][k]`` to ``buffer_ptrs[i] +
        all_dst_offsets[i][j][k]``. Returns the same nesting of bytes copied, or a negative
        ErrorCode per fragment (OBJECT_NOT_FOUND for a missing key, INVALID_PARAMS for a range
        outside the object). Lists of different lengths: ``[[INVALID_PARAMS]]`` per buffer when
        the top-level lists differ, ``[INVALID_PARAMS]`` per key when a buffer's do (the
        shapes Mooncake's answer has)."""
        if not len(buffer_ptrs) == len(all_keys) == len(all_dst_offsets) == len(
                all_src_offsets) == len(all_sizes):
            return [[[_INVALID_PARAMS]] for _ in buffer_ptrs]  # Mooncake's shape of this error
        unique = list(dict.fromkeys(k for keys in all_keys for k in keys))
        values = dict(zip(unique, self.batch_get_buffer(unique))) if unique else {}
        results = []
        for base, keys, dsts, srcs, sizes in zip(buffer_ptrs, all_keys, all_dst_offsets,
                                                 all_src_offsets, all_sizes):
            per_buffer = []
            if not len(keys) == len(dsts) == len(srcs) == len(sizes):
                results.append([[_INVALID_PARAMS] for _ in keys])
                continue
            for key, dst, src, size in zip(keys, dsts, srcs, sizes):
                per_buffer.append(self._read_fragments(values.get(key), base, dst, src, size))
            results.append(per_buffer)
        return results

    @staticmethod
    def _read_fragments(handle, base, dsts, srcs, sizes):
        if handle is None:
            return [_OBJECT_NOT_FOUND] * len(sizes)
        if not len(dsts) == len(srcs) == len(sizes):
            return [_INVALID_PARAMS] * len(sizes)
        out = []
        for dst, src, size in zip(dsts, srcs, sizes):
            if dst < 0 or not _fits(src, size, handle.size()):
                out.append(_INVALID_PARAMS)
                continue
            _copy_ranges([base + dst], [size], [handle.ptr() + src])
            out.append(size)
        return out

    def batch_get_session_start(self, keys):
        """Reads each key once and keeps it for the ranged reads that follow: per key 0, or a
        negative ErrorCode (OBJECT_NOT_FOUND). ``[]`` when the store is not set up."""
        if not self.is_set_up:
            return []
        handles = self.batch_get_buffer(list(keys)) if keys else []
        state = self._sessions()
        with state["lock"]:
            for key, handle in zip(keys, handles):
                if handle is not None:
                    state["get"][key] = handle
        return [0 if h is not None else _OBJECT_NOT_FOUND for h in handles]

    def batch_get_into_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_src_offsets):
        """For each key of an open get session, copies ``all_sizes[i][j]`` bytes from offset
        ``all_src_offsets[i][j]`` of the object to ``all_buffer_ptrs[i][j]``. Per key the bytes
        copied (their sum), or INVALID_PARAMS (no session, a range outside the object, lists of
        different lengths). ``[]`` when the store is not set up."""
        if not self.is_set_up:
            return []
        objects = [(h.ptr(), h.size()) if h is not None else None
                   for h in self._open_sessions("get", keys)]
        return _ranged_copies(objects, all_buffer_ptrs, all_sizes, all_src_offsets, into=False)

    def batch_get_session_end(self, keys):
        """Drops the keys' get sessions. One int: 0 (-1 when the store is not set up)."""
        if not self.is_set_up:
            return -1
        state = self._sessions()
        with state["lock"]:
            for key in keys:
                state["get"].pop(key, None)
        return 0

    # ---- put side ----

    def batch_put_session_start(self, keys, sizes, config=None):
        """Opens a put session per key for an object of ``sizes[i]`` bytes, to be written by
        ranges and stored at ``batch_put_session_end``. Per key 0, or OBJECT_ALREADY_EXISTS
        (stored), INVALID_PARAMS (a session is open, size not > 0). ``[]`` when not set up.
        The key is not reserved at the master until the end: a put by another client in
        between wins (first writer wins), and this session's end then stores nothing."""
        if not self.is_set_up:
            return []
        if len(keys) != len(sizes):
            return [_INVALID_PARAMS] * len(keys)
        exists = self.batch_is_exist(list(keys)) if keys else []
        state = self._sessions()
        out = []
        with state["lock"]:
            for key, size, found in zip(keys, sizes, exists):
                if not isinstance(size, int) or size <= 0:
                    out.append(_INVALID_PARAMS)
                elif key in state["put"]:
                    out.append(_INVALID_PARAMS)  # as Mooncake: a session is already open
                elif found == 1:
                    out.append(_OBJECT_ALREADY_EXISTS)
                elif found < 0:
                    out.append(found)
                else:
                    state["put"][key] = (bytearray(size), config)
                    out.append(0)
        return out

    def batch_put_from_multi_buffer_ranges(self, keys, all_buffer_ptrs, all_sizes,
                                           all_dst_offsets):
        """For each key of an open put session, copies ``all_sizes[i][j]`` bytes from
        ``all_buffer_ptrs[i][j]`` to offset ``all_dst_offsets[i][j]`` of the object. Per key the
        bytes copied (their sum), or INVALID_PARAMS (no session, a range outside the object,
        lists of different lengths). ``[]`` when not set up."""
        if not self.is_set_up:
            return []
        objects = [(_address(p[0]), len(p[0])) if p is not None else None
                   for p in self._open_sessions("put", keys)]
        return _ranged_copies(objects, all_buffer_ptrs, all_sizes, all_dst_offsets, into=True)

    def batch_put_session_end(self, keys):
        """Stores each session's object and closes the session: per key 0, or a negative
        ErrorCode (INVALID_PARAMS when no session is open). ``[]`` when not set up."""
        sessions = self._take_put_sessions(keys)
        if sessions is None:
            return []
        return [self.put(k, s[0], s[1]) if s is not None else _INVALID_PARAMS
                for k, s in zip(keys, sessions)]

    def batch_put_session_revoke(self, keys):
        """Closes the sessions without storing anything: per key 0, or INVALID_PARAMS when no
        session is open. ``[]`` when not set up."""
        sessions = self._take_put_sessions(keys)
        if sessions is None:
            return []
        return [0 if s is not None else _INVALID_PARAMS for s in sessions]

    def _take_put_sessions(self, keys):
        if not self.is_set_up:
            return None
        state = self._sessions()
        with state["lock"]:
            return [state["put"].pop(k, None) for k in keys]

    def put_from_with_metadata(self, key, buffer_ptr, metadata_buffer_ptr, size, metadata_size,
                               config=None):
        """Stores one object: ``metadata_size`` bytes at ``metadata_buffer_ptr`` followed by
        ``size`` bytes at ``buffer_ptr`` (any memory). 0 or a negative ErrorCode."""
        return self.batch_put_from_multi_buffers(
            [key], [[metadata_buffer_ptr, buffer_ptr]], [[metadata_size, size]], config)[0]
