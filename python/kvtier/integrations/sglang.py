"""An SGLang HiCache storage backend (its L3 tier) over the kvtier store.

SGLang loads it with its dynamic backend loader::

    --enable-hierarchical-cache --hicache-storage-backend dynamic
    --hicache-storage-backend-extra-config '{"backend_name": "kvtier",
        "module_path": "kvtier.integrations.sglang", "class_name": "KvtierHiCacheStorage",
        "interface_v1": 1, "node_address": "127.0.0.1:50052"}'

Every page of SGLang's host KV pool becomes store objects named after the page's hash: MHA pages
``{prefix}{hash}_{tp_rank}_k`` and ``..._v`` (each rank holds its own heads), MLA pages one
``{prefix}{hash}_kv`` shared by every rank (SGLang lets only rank 0 write it). As an embedded
node (``master_server_address``) this process moves pages straight between the host pool and the
store; as a dummy client of the node on this host (``node_address``) the pages go through the
node's staging memory, because SGLang allocates a dynamic backend's host pool itself, in memory
the node cannot map. See docs/integrations.md.
"""

import logging
import re

import torch

from kvtier.store import MooncakeDistributedStore

try:  # the real base class when SGLang is installed, so its loader's subclass check passes
    from sglang.srt.mem_cache.hicache_storage import HiCacheStorage as _Base
except ImportError:  # SGLang absent (tests, tools): the same interface without it
    class _Base:
        def register_mem_pool_host(self, mem_pool_host):
            self.mem_pool_host = mem_pool_host

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
_SGLANG_KEYS = {"backend_name", "module_path", "class_name", "interface_v1", "allocator"}


def _config_value(extra, key):
    value = extra.get(key, _CONFIG_KEYS[key])
    if value is not None and not isinstance(value, (str, int)):
        raise ValueError(f"kvtier HiCache backend: {key!r} must be a string, not "
                         f"{type(value).__name__}")
    return value


class KvtierHiCacheStorage(_Base):
    """SGLang's HiCacheStorage on a kvtier store client (one per TP rank)."""

    def __init__(self, storage_config, kwargs=None, **_):
        extra = dict(getattr(storage_config, "extra_config", None) or {})
        for key in sorted(set(extra) - set(_CONFIG_KEYS) - _SGLANG_KEYS):
            _log.warning("kvtier HiCache backend: ignoring unknown extra_config key %r", key)
        self.tp_rank = int(getattr(storage_config, "tp_rank", 0))
        self.is_mla = bool(getattr(storage_config, "is_mla_model", False))
        prefix = _config_value(extra, "key_prefix")
        model = getattr(storage_config, "model_name", None)
        self.key_prefix = prefix if prefix is not None else (f"{model}/" if model else "")
        self.mem_pool_host = None
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

    # ---- the host pool and page objects ----

    def register_mem_pool_host(self, mem_pool_host):
        super().register_mem_pool_host(mem_pool_host)
        self.mem_pool_host = mem_pool_host
        buffer = getattr(mem_pool_host, "kv_buffer", None)
        if self.embedded and buffer is not None:
            # An embedded node reaches all of this process's memory; registering says so.
            code = self.store.register_buffer(buffer.data_ptr(),
                                              buffer.numel() * buffer.element_size())
            if code != 0:
                raise RuntimeError(f"kvtier HiCache backend: register_buffer failed ({code})")

    def _parts(self, page_hash):
        base = f"{self.key_prefix}{page_hash}"
        return [f"{base}_kv"] if self.is_mla else [f"{base}_{self.tp_rank}_k",
                                                    f"{base}_{self.tp_rank}_v"]

    def _objects(self, keys, host_indices):
        """(object keys, their buffer lists, their size lists), len(parts) objects per page,
        from the pool's page pointers: one or more ranges per object (layer_first pools give one
        per layer, alternating K and V for MHA)."""
        ptrs, sizes = self.mem_pool_host.get_page_buffer_meta(host_indices)
        per_page = len(ptrs) // max(len(keys), 1)
        parts = 1 if self.is_mla else 2
        names, buffers, lengths = [], [], []
        for page, page_hash in enumerate(keys):
            mine = slice(page * per_page, (page + 1) * per_page)
            page_ptrs, page_sizes = list(ptrs[mine]), list(sizes[mine])
            for part, name in enumerate(self._parts(page_hash)):
                names.append(name)
                buffers.append([int(p) for p in page_ptrs[part::parts]])
                lengths.append([int(n) for n in page_sizes[part::parts]])
        return names, buffers, lengths

    @staticmethod
    def _per_page(results, parts):
        return [all(results[i:i + parts]) for i in range(0, len(results), parts)]

    def _leading_pages(self, object_keys):
        parts = 1 if self.is_mla else 2
        present = self.store.batch_is_exist(object_keys) if object_keys else []
        pages = self._per_page([code == 1 for code in present], parts)
        return next((i for i, ok in enumerate(pages) if not ok), len(pages))

    # ---- HiCacheStorage, zero-copy interface (interface_v1) ----

    def batch_exists(self, keys, extra_info=None):
        """How many pages, from the first, are stored whole (SGLang's prefix hit)."""
        return self._leading_pages([name for k in keys for name in self._parts(k)])

    def batch_set_v1(self, keys, host_indices, extra_info=None):
        """Stores the pages at `host_indices` (page_size slots per key); per page True when it is
        stored (pages already there are not written again)."""
        names, buffers, lengths = self._objects(keys, host_indices)
        present = self.store.batch_is_exist(names) if names else []
        todo = [i for i, code in enumerate(present) if code != 1]
        results = [code == 1 for code in present]
        if todo:
            codes = self._put([names[i] for i in todo], [buffers[i] for i in todo],
                              [lengths[i] for i in todo])
            for i, code in zip(todo, codes):
                results[i] = code == 0
        return self._per_page(results, 1 if self.is_mla else 2)

    def batch_get_v1(self, keys, host_indices, extra_info=None):
        """Loads the pages into `host_indices`; per page True when every byte arrived."""
        names, buffers, lengths = self._objects(keys, host_indices)
        codes = self._get(names, buffers, lengths)
        results = [code == sum(n) for code, n in zip(codes, lengths)]
        return self._per_page(results, 1 if self.is_mla else 2)

    def _put(self, names, buffers, lengths):
        if self.embedded and all(len(b) == 1 for b in buffers):
            return self.store.batch_put_from(names, [b[0] for b in buffers],
                                             [n[0] for n in lengths])
        return self.store.batch_put_from_multi_buffers(names, buffers, lengths)

    def _get(self, names, buffers, lengths):
        if self.embedded and all(len(b) == 1 for b in buffers):
            return self.store.batch_get_into(names, [b[0] for b in buffers],
                                             [n[0] for n in lengths])
        return self.store.batch_get_into_multi_buffers(names, buffers, lengths)

    # ---- HiCacheStorage, generic interface (flat page tensors) ----

    def _flat_key(self, page_hash):
        if self.is_mla:
            return f"{self.key_prefix}{page_hash}_kv"
        return f"{self.key_prefix}{page_hash}_{self.tp_rank}_page"

    def get(self, key, target_location=None, target_sizes=None):
        """The page into `target_location` (a flat tensor, returned), or None when missing."""
        raw = self.store.get(self._flat_key(key))
        if not raw or target_location is None:
            return None
        target = target_location.view(-1).view(torch.uint8)
        if target.numel() != len(raw):
            _log.warning("kvtier HiCache backend: page %s has %d bytes, the target %d", key,
                         len(raw), target.numel())
            return None
        target.copy_(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        return target_location

    def batch_get(self, keys, target_locations=None, target_sizes=None):
        targets = target_locations or [None] * len(keys)
        return [self.get(k, t) for k, t in zip(keys, targets)]

    def set(self, key, value=None, target_location=None, target_sizes=None):
        """Stores a flat page tensor; True when stored (or already there)."""
        if value is None:
            return False
        flat = value.detach().contiguous().view(-1).view(torch.uint8)
        return self.store.put(self._flat_key(key), flat.numpy()) == 0

    def batch_set(self, keys, values=None, target_locations=None, target_sizes=None):
        return all(self.set(k, v) for k, v in zip(keys, values or []))

    def exists(self, key):
        return self.batch_exists([key]) == 1 or self.store.is_exist(self._flat_key(key)) == 1

    def delete(self, key):
        self.store.batch_remove(self._parts(key) + [self._flat_key(key)], force=True)

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

