"""The page moves of the SGLang HiCache backend: store calls over a host pool's page pointers
(zero-copy interface), over flat page tensors (SGLang's generic interface), and the v2 calls of
hybrid models' extra pools (Mamba state, SWA, DSA indexer), which go through each pool's flat
pages: their layouts are many and their pages small next to the KV pages."""

import logging

import torch

try:
    from sglang.srt.mem_cache.hicache_storage import PoolName, PoolTransferResult
    KV_POOL = PoolName.KV
except ImportError:  # SGLang absent: the same result type without it
    import dataclasses

    KV_POOL = "kv"

    @dataclasses.dataclass
    class PoolTransferResult:
        kv_hit_pages: int
        extra_pool_hit_pages: dict
        restorable_prefix_pages: list = None

_log = logging.getLogger("kvtier.integrations.sglang")


def flat_bytes(tensor):
    """A contiguous uint8 view of a tensor (a copy only when it is not contiguous)."""
    return tensor.detach().contiguous().view(-1).view(torch.uint8)


def split_ranges(flat, parts):
    """(pointer lists, size lists) that cut a flat page into `parts` equal objects, or None."""
    total = flat.numel()
    if parts == 0 or total % parts:
        return None
    size, base = total // parts, flat.data_ptr()
    return [[base + i * size] for i in range(parts)], [[size] for _ in range(parts)]


def leading(flags):
    """How many flags, from the first, are true."""
    return next((i for i, ok in enumerate(flags) if not ok), len(flags))


def present_pages(store, names, page_hashes):
    """Per page: every object of the page is stored."""
    objects = names.pages(page_hashes)
    codes = store.batch_is_exist(objects) if objects else []
    n = len(names.parts)
    return [all(code == 1 for code in codes[i:i + n]) for i in range(0, len(codes), n)]


def put_flat_pages(store, names, page_hashes, tensors):
    """Stores flat page tensors (each cut into the page's objects); per page True when stored
    or already there."""
    objects, ptrs, sizes, owners, ok = [], [], [], [], [True] * len(page_hashes)
    present = present_pages(store, names, page_hashes)
    flats = []  # kept alive until the store has copied them
    for page, (page_hash, tensor) in enumerate(zip(page_hashes, tensors)):
        if present[page]:
            continue
        if tensor is None:
            ok[page] = False
            continue
        flat = flat_bytes(tensor)
        cut = split_ranges(flat, len(names.parts))
        if cut is None:
            _log.warning("kvtier HiCache backend: page %s has %d bytes, not a multiple of its "
                         "%d objects", page_hash, flat.numel(), len(names.parts))
            ok[page] = False
            continue
        flats.append(flat)
        objects += names.page(page_hash)
        ptrs += cut[0]
        sizes += cut[1]
        owners += [page] * len(names.parts)
    if objects:
        for page, code in zip(owners, store.batch_put_from_multi_buffers(objects, ptrs, sizes)):
            ok[page] = ok[page] and code == 0
    return ok


def get_flat_pages(store, names, page_hashes, targets):
    """Loads pages into flat targets (contiguous tensors); per page True when every byte
    arrived."""
    objects, ptrs, sizes, owners, ok = [], [], [], [], [False] * len(page_hashes)
    for page, (page_hash, target) in enumerate(zip(page_hashes, targets)):
        if target is None or not target.is_contiguous():
            continue
        cut = split_ranges(target.view(-1).view(torch.uint8), len(names.parts))
        if cut is None:
            continue
        objects += names.page(page_hash)
        ptrs += cut[0]
        sizes += cut[1]
        owners += [page] * len(names.parts)
        ok[page] = True
    if objects:
        codes = store.batch_get_into_multi_buffers(objects, ptrs, sizes)
        for page, code, size in zip(owners, codes, sizes):
            ok[page] = ok[page] and code == size[0]
    return ok


# ---- hybrid models' extra pools (the *_v2 calls) ----

def _policy(transfer):
    policy = getattr(transfer, "hit_policy", "all_pages")
    return str(getattr(policy, "value", policy))


def exists_v2(store, kv_names, pool_names, keys, transfers):
    """SGLang's batch_exists_v2: the usable KV prefix, with each extra pool's verdict.

    An all_pages pool must hold every page of the prefix; a trailing_pages pool only the last
    len(transfer.keys) pages before the prefix's end. restorable_prefix_pages lists each prefix
    length that every pool can restore; kv_hit_pages is the longest."""
    kv_pages = leading(present_pages(store, kv_names, keys))
    hits = {KV_POOL: kv_pages} if kv_pages else {}
    restorable = set(range(1, kv_pages + 1))
    for transfer in transfers or []:
        if not restorable:
            break
        policy = _policy(transfer)
        present = present_pages(store, pool_names(transfer.name), keys[:kv_pages])
        if policy == "all_pages":
            ok = set(range(1, leading(present) + 1))
        elif policy == "trailing_pages":
            window = max(1, len(transfer.keys or []))
            ok = {n for n in range(1, kv_pages + 1) if all(present[max(0, n - window):n])}
        else:
            raise ValueError(f"kvtier HiCache backend: hit policy {policy!r} of pool "
                             f"{transfer.name} is not supported (all_pages, trailing_pages are)")
        if ok:
            hits[transfer.name] = max(ok)
        restorable &= ok
    return PoolTransferResult(max(restorable, default=0), hits, sorted(restorable))


def _page_starts(transfer, pool):
    """The first host slot of each key's page, or None when the indices do not match."""
    keys, indices = transfer.keys or [], transfer.host_indices
    page = int(getattr(pool, "page_size", 1) or 1)
    if indices is None or indices.numel() != len(keys) * page:
        _log.error("kvtier HiCache backend: pool %s got %s host indices for %d pages of %d "
                   "slots", transfer.name, None if indices is None else indices.numel(),
                   len(keys), page)
        return None
    return [int(i) for i in indices[::page].tolist()]


def _matched(pools, transfers, results):
    """Yields (transfer, pool, keys, page starts) of each transfer whose host indices match its
    keys; one whose indices do not gets False for every page in `results`."""
    for transfer in transfers:
        pool, keys = pools(transfer.name), transfer.keys or []
        starts = _page_starts(transfer, pool)
        if starts is None:
            results[transfer.name] = [False] * len(keys)
        else:
            yield transfer, pool, keys, starts


def set_v2(store, pool_names, pools, transfers):
    """SGLang's batch_set_v2: per extra pool, per page True when stored."""
    results = {}
    for transfer, pool, keys, starts in _matched(pools, transfers, results):
        pages = [pool.get_data_page(start, flat=True) for start in starts]
        results[transfer.name] = put_flat_pages(store, pool_names(transfer.name), keys, pages)
    return results


def get_v2(store, pool_names, pools, transfers):
    """SGLang's batch_get_v2: per extra pool, per page True when loaded into its host slots."""
    results = {}
    for transfer, pool, keys, starts in _matched(pools, transfers, results):
        targets = [pool.get_dummy_flat_data_page() for _ in keys]
        ok = get_flat_pages(store, pool_names(transfer.name), keys, targets)
        for page, start in enumerate(starts):
            if ok[page]:
                pool.set_from_flat_data_page(start, targets[page])
        results[transfer.name] = ok
    return results
