"""An SGLang HiCache storage backend (its L3 tier) over the kvtier store.

SGLang's StorageBackendFactory loads it as a dynamic backend::

    --enable-hierarchical-cache --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "kvtier",
        "module_path": "kvtier.integrations.sglang", "class_name": "KvtierHiCacheStorage",
        "interface_v1": 1, "node_address": "127.0.0.1:50052"}'

Pages become store objects named after the page hash, the host pool's byte format and this
process's parallel position (tensor, pipeline and context parallel ranks): see _sglang_keys.py.
SGLang's zero-copy calls (``interface_v1``: batch_set_v1 / batch_get_v1 over host slots) and its
generic calls (flat page tensors) use the same objects, so a page stored by one is found and
loaded by the other. As an embedded node (``master_server_address``) this process moves
zero-copy pages straight between the host pool and the store; as a dummy client of the node on
this host (``node_address``) they go through the node's staging memory, because SGLang allocates
a dynamic backend's host pool itself, in memory the node cannot map. See docs/integrations.md.
"""

import logging
import re

from kvtier.integrations import _sglang_pools as pages
from kvtier.integrations._sglang_keys import Shard, extra_pool_names, kv_names
from kvtier.store import MooncakeDistributedStore

try:  # the real base class when SGLang is installed: its factory's subclass check needs it
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage as _Base
except ImportError:  # SGLang absent (tests, tools): the same interface without it
    class _Base:
        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

        def register_mem_host_pool_v2(self, host_pool, host_pool_name):
            if not hasattr(self, "registered_pools"):
                self.registered_pools = {}
            self.registered_pools[host_pool_name] = host_pool

        def on_host_pools_registered(self):
            pass

_log = logging.getLogger("kvtier.integrations.sglang")

_CONFIG_KEYS = {
    "node_address": None,            # dummy mode: the kvtier node on this host, "host:port"
    "master_server_address": None,   # embedded mode: the master, "host:port"
    "local_hostname": "127.0.0.1",   # embedded: where this process's data plane binds
    "global_segment_size": "4GB",    # embedded: the segment this rank contributes
    "local_buffer_size": "64MB",     # staging for the bytes calls
    "auth_token_file": None,         # the store's shared secret (docs/security.md)
    "key_prefix": None,              # default: "<model_name>/" when SGLang names the model
}
# Keys SGLang itself reads from the same extra_config.
_SGLANG_KEYS = {"backend_name", "module_path", "class_name", "interface_v1", "allocator",
                "tp_lcm_size"}
_TENSOR_NAMES = ("k_buffer", "v_buffer", "index_k_buffer", "index_k_scale_buffer")


def _config_value(extra, key):
    value = extra.get(key, _CONFIG_KEYS[key])
    if value is not None and not isinstance(value, (str, int)):
        raise ValueError(f"kvtier HiCache backend: {key!r} must be a string, not "
                         f"{type(value).__name__}")
    return value


def _host_tensors(pool):
    """The distinct host memory ranges of a pool, (pointer, bytes): its kv_buffer (one tensor,
    or a tuple of K and V when their head dims differ) and any separate K/V/indexer buffers."""
    found = []
    buffer = getattr(pool, "kv_buffer", None)
    candidates = list(buffer) if isinstance(buffer, (tuple, list)) else [buffer]
    candidates += [getattr(pool, name, None) for name in _TENSOR_NAMES]
    for tensor in candidates:
        if tensor is None or not hasattr(tensor, "data_ptr") or tensor.device.type != "cpu":
            continue
        start, size = tensor.data_ptr(), tensor.numel() * tensor.element_size()
        if size and not any(s <= start and start + size <= s + n for s, n in found):
            found.append((start, size))
    return found


class KvtierHiCacheStorage(_Base):
    """SGLang's HiCacheStorage on a kvtier store client (one per SGLang rank)."""

    def __init__(self, storage_config, kwargs=None, **_):
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        for key in sorted(set(extra) - set(_CONFIG_KEYS) - _SGLANG_KEYS):
            _log.warning("kvtier HiCache backend: ignoring unknown extra_config key %r", key)
        if getattr(storage_config, "should_split_heads", False):
            raise ValueError("kvtier HiCache backend: tp_lcm_size (pages shared between "
                             "different TP sizes by splitting heads) is not supported")
        self.shard = Shard(storage_config)
        self.is_mla = self.shard.mla
        self.tp_rank = self.shard.tp[0]
        prefix = _config_value(extra, "key_prefix")
        model = getattr(storage_config, "model_name", None)
        self.key_prefix = prefix if prefix is not None else (f"{model}/" if model else "")
        self.mem_pool_host = None
        self.registered_pools = {}
        self._kv = None              # the KV pool's object names, once it is registered
        self._registered = []        # (pointer, bytes) registered with an embedded node
        self.embedded = _config_value(extra, "master_server_address") is not None
        self.store = MooncakeDistributedStore()
        self._setup(extra)

    def _setup(self, extra):
        value = lambda key: _config_value(extra, key)  # noqa: E731
        if self.embedded:
            code = self.store.setup(value("local_hostname"), None, value("global_segment_size"),
                                    value("local_buffer_size"), "tcp", "",
                                    value("master_server_address"),
                                    auth_token_file=value("auth_token_file"))
            where = f"master {value('master_server_address')}"
        elif value("node_address") is not None:
            code = self.store.setup_dummy(0, value("local_buffer_size"), value("node_address"))
            where = f"node {value('node_address')}"
        else:
            raise ValueError("kvtier HiCache backend: extra_config needs 'node_address' (a kvtier "
                             "node on this host) or 'master_server_address' (embedded node)")
        if code != 0:
            raise RuntimeError(f"kvtier HiCache backend: cannot reach the store at {where} "
                               f"(error {code}; the kvtier.store log says why)")

    # ---- host pools ----

    def register_mem_pool_host(self, mem_pool_host):
        super().register_mem_pool_host(mem_pool_host)
        self.mem_pool_host = mem_pool_host
        self._kv = kv_names(self.key_prefix, mem_pool_host, self.shard)
        if self.embedded:
            # An embedded node reaches all of this process's memory; registering says which.
            for start, size in _host_tensors(mem_pool_host):
                code = self.store.register_buffer(start, size)
                if code != 0:
                    raise RuntimeError(f"kvtier HiCache backend: register_buffer of the host "
                                       f"pool ({size} bytes) failed ({code})")
                self._registered.append((start, size))

    def register_mem_host_pool_v2(self, host_pool, host_pool_name):
        super().register_mem_host_pool_v2(host_pool, host_pool_name)
        self.registered_pools[host_pool_name] = host_pool

    def _kv_names(self):
        if self._kv is None:
            raise RuntimeError("kvtier HiCache backend: register_mem_pool_host first")
        return self._kv

    def _pool(self, name):
        pool = self.registered_pools.get(name)
        if pool is None:
            wanted = str(getattr(name, "value", name))
            pool = next((p for n, p in self.registered_pools.items()
                         if str(getattr(n, "value", n)) == wanted), None)
        if pool is None:
            raise KeyError(f"kvtier HiCache backend: no host pool {name!r} registered "
                           f"(register_mem_host_pool_v2)")
        return pool

    def _pool_names(self, name):
        return extra_pool_names(self.key_prefix, self._pool(name), self.shard, name)

    # ---- zero-copy interface (interface_v1) ----

    def _objects(self, keys, host_indices):
        """(object names, their pointer lists, their size lists) from the pool's page pointers:
        per page the pool gives one or more ranges (layer_first: one per layer, K and V
        alternating for MHA), and each part of the page takes every len(parts)-th."""
        names = self._kv_names()
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        parts = len(names.parts)
        if not keys or len(ptrs) % (len(keys) * parts):
            raise ValueError(f"kvtier HiCache backend: {len(ptrs)} page ranges for "
                             f"{len(keys)} pages of {parts} objects")
        per_page = len(ptrs) // len(keys)
        objects, buffers, lengths = [], [], []
        for page, page_hash in enumerate(keys):
            mine = slice(page * per_page, (page + 1) * per_page)
            page_ptrs, page_sizes = list(ptrs[mine]), list(sizes[mine])
            for part, name in enumerate(names.page(page_hash)):
                objects.append(name)
                buffers.append([int(p) for p in page_ptrs[part::parts]])
                lengths.append([int(n) for n in page_sizes[part::parts]])
        return objects, buffers, lengths

    def _per_page(self, results):
        n = len(self._kv_names().parts)
        return [all(results[i:i + n]) for i in range(0, len(results), n)]

    def batch_exists(self, keys, extra_info=None):
        """How many pages, from the first, are stored whole (SGLang's prefix hit)."""
        return pages.leading(pages.present_pages(self.store, self._kv_names(), keys))

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        """Stores the pages at `host_indices` (page_size slots per key); per page True when it is
        stored (pages already there are not written again)."""
        if not keys:
            return []
        objects, buffers, lengths = self._objects(keys, host_indices)
        present = self.store.batch_is_exist(objects)
        todo = [i for i, code in enumerate(present) if code != 1]
        results = [code == 1 for code in present]
        if todo:
            codes = self._put([objects[i] for i in todo], [buffers[i] for i in todo],
                              [lengths[i] for i in todo])
            for i, code in zip(todo, codes):
                results[i] = code == 0
        return self._per_page(results)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        """Loads the pages into `host_indices`; per page True when every byte arrived."""
        if not keys:
            return []
        objects, buffers, lengths = self._objects(keys, host_indices)
        codes = self._get(objects, buffers, lengths)
        return self._per_page([code == sum(n) for code, n in zip(codes, lengths)])

    def _in_registered(self, buffers, lengths):
        """Every object is one range inside memory registered with the embedded node."""
        return self.embedded and all(
            len(b) == 1 and any(s <= b[0] and b[0] + n[0] <= s + size
                                for s, size in self._registered)
            for b, n in zip(buffers, lengths))

    def _put(self, objects, buffers, lengths):
        if self._in_registered(buffers, lengths):
            return self.store.batch_put_from(objects, [b[0] for b in buffers],
                                             [n[0] for n in lengths])
        return self.store.batch_put_from_multi_buffers(objects, buffers, lengths)

    def _get(self, objects, buffers, lengths):
        if self._in_registered(buffers, lengths):
            return self.store.batch_get_into(objects, [b[0] for b in buffers],
                                             [n[0] for n in lengths])
        return self.store.batch_get_into_multi_buffers(objects, buffers, lengths)

    # ---- generic interface (flat page tensors, SGLang without interface_v1) ----

    def get(self, key, target_location=None, target_sizes=None):
        """The page into `target_location` (a flat page tensor, returned), or None."""
        return self.batch_get([key], [target_location])[0]

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        """Per key its flat target with the page loaded, or None (missing, or a target whose
        size is not the page's)."""
        targets = list(target_locations or [None] * len(keys))
        for i, target in enumerate(targets):
            if target is None and self.mem_pool_host is not None:
                targets[i] = self.mem_pool_host.get_dummy_flat_data_page()
        ok = pages.get_flat_pages(self.store, self._kv_names(), keys, targets)
        return [t if good else None for t, good in zip(targets, ok)]

    def set(self, key, value=None, target_location=None, target_sizes=None):
        """Stores a flat page tensor; True when stored (or already there)."""
        return self.batch_set([key], [value])

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        """Stores flat page tensors; True when every page is stored (or already there)."""
        values = list(values or [])
        if len(values) != len(keys):
            return False
        return all(pages.put_flat_pages(self.store, self._kv_names(), keys, values))

    def exists(self, key):
        return self.batch_exists([key]) == 1

    # ---- hybrid models' extra pools ----

    def batch_exists_v2(self, keys, pool_transfers=None, extra_info=None):
        return pages.exists_v2(self.store, self._kv_names(), self._pool_names, keys,
                               pool_transfers)

    def batch_get_v2(self, transfers, extra_info=None):
        return pages.get_v2(self.store, self._pool_names, self._pool, transfers)

    def batch_set_v2(self, transfers, extra_info=None):
        return pages.set_v2(self.store, self._pool_names, self._pool, transfers)

    # ---- housekeeping ----

    def delete(self, key):
        """Removes the page's objects (KV and every registered extra pool's)."""
        objects = self._kv_names().page(key)
        for name in self.registered_pools:
            if str(getattr(name, "value", name)) != "kv":  # SGLang registers the KV pool too
                objects += self._pool_names(name).page(key)
        self.store.batch_remove(objects, force=True)

    def clear(self):
        """Removes every object of this backend's prefix (everything without a prefix)."""
        if self.key_prefix:
            self.store.remove_by_regex("^" + re.escape(self.key_prefix), force=True)
        else:
            self.store.remove_all(force=True)

    def get_stats(self):
        return None

    def close(self):
        self.store.close()
