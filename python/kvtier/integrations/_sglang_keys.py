"""Store object names for the SGLang HiCache backend (kvtier.integrations.sglang).

One page of one host pool becomes one or more objects named

    {key_prefix}{page hash}@{format}@{shard}@{part}

- format: how the page's bytes are ordered and typed, from the host pool that wrote them
  (``token-major-bfloat16``): SGLang's host layouts order a page's bytes differently (page_first
  is token by layer, layer_first and page_first_direct layer by token), so a page written under
  one layout must miss, not load transposed, under another.
- shard: which slice of the model's KV this process holds. MHA heads are split over the TP
  ranks (``tp1of2``), each pipeline stage holds its own layers (``pp0of2``), each attention
  context-parallel rank its own slice of every page (``cp0of1``). MLA KV is the same on every
  TP rank, so its shard names no TP rank (SGLang lets one rank write it); a DCP rank's share of
  an MLA page adds ``dcp0of2``.
- part: ``k`` and ``v`` (MHA), ``kv`` (MLA), or the name of a hybrid model's extra pool
  (``mamba``, ``swa``, ...).

A page hit needs every part of the page under this process's format and shard.
"""

# SGLang's host pool layouts -> the order of a page's bytes (its zero-copy objects and its flat
# page both follow it).
_BYTE_ORDER = {
    "layer_first": "layer-major",
    "page_first_direct": "layer-major",
    "page_first": "token-major",
    "page_head": "head-major",
}

MAMBA = "mamba"  # SGLang shards Mamba state over TP ranks even when the KV is MLA


def page_format(pool):
    """The format word of a host pool: byte order and dtype."""
    layout = str(getattr(pool, "layout", "flat"))
    dtype = str(getattr(pool, "dtype", "bytes")).replace("torch.", "")
    return f"{_BYTE_ORDER.get(layout, layout)}-{dtype}"


def _int(config, name, default):
    value = getattr(config, name, default)
    return default if value is None else int(value)


class Shard:
    """The parallel position of this process, from SGLang's HiCacheStorageConfig."""

    def __init__(self, config):
        self.mla = bool(getattr(config, "is_mla_model", False))
        self.tp = (_int(config, "tp_rank", 0), _int(config, "tp_size", 1))
        self.pp = (_int(config, "pp_rank", 0), _int(config, "pp_size", 1))
        self.cp = (_int(config, "attn_cp_rank", 0), _int(config, "attn_cp_size", 1))
        self.dcp = (_int(config, "dcp_rank", 0), _int(config, "dcp_size", 1))
        for name, (rank, size) in (("tp", self.tp), ("pp", self.pp), ("attn_cp", self.cp),
                                   ("dcp", self.dcp)):
            if size < 1 or not 0 <= rank < size:
                raise ValueError(f"kvtier HiCache backend: {name}_rank {rank} is outside "
                                 f"{name}_size {size}")

    def words(self, per_rank):
        """The shard string; `per_rank` says whether the data differs between TP ranks."""
        parts = [f"tp{self.tp[0]}of{self.tp[1]}"] if per_rank else []
        parts += [f"pp{self.pp[0]}of{self.pp[1]}", f"cp{self.cp[0]}of{self.cp[1]}"]
        if self.dcp[1] > 1:
            parts.append(f"dcp{self.dcp[0]}of{self.dcp[1]}")
        return ".".join(parts)


class PageNames:
    """Names of one pool's objects: `parts` per page (k and v, kv, or the pool's name)."""

    def __init__(self, prefix, pool, shard, parts, per_rank):
        self.parts = tuple(parts)
        self._middle = f"@{page_format(pool)}@{shard.words(per_rank)}@"
        self._prefix = prefix

    def page(self, page_hash):
        base = f"{self._prefix}{page_hash}{self._middle}"
        return [base + part for part in self.parts]

    def pages(self, page_hashes):
        return [name for page_hash in page_hashes for name in self.page(page_hash)]


def kv_names(prefix, pool, shard):
    """The KV pool's names: k and v per TP rank (MHA), or one kv object all ranks share (MLA)."""
    if shard.mla:
        return PageNames(prefix, pool, shard, ["kv"], per_rank=False)
    return PageNames(prefix, pool, shard, ["k", "v"], per_rank=True)


def extra_pool_names(prefix, pool, shard, pool_name):
    """A hybrid model's extra pool (registered with register_mem_host_pool_v2): one object per
    page. Per TP rank unless SGLang writes it from one rank only (an MLA model's pools other than
    Mamba state, as its controller's should_backup decides)."""
    name = str(getattr(pool_name, "value", pool_name))
    per_rank = not shard.mla or name == MAMBA
    return PageNames(prefix, pool, shard, [name], per_rank=per_rank)
