"""SGLang 0.5.23's own HiCache machinery driving kvtier.integrations.sglang against a real kvtier
store (`kvtier master` + `kvtier node` processes, store_cluster.py).

What is SGLang's own here: the device KV pools (MHATokenToKVPool, MLATokenToKVPool on the CPU),
the host pools built over them (MHATokenToKVPoolHost, its K/V-split AsymmetricMHATokenToKVPoolHost,
MLATokenToKVPoolHost), the page allocator, the HostPoolGroup, and HybridCacheController (the
cache controller 0.5.23's unified radix cache builds for every model): it attaches the backend
through StorageBackendFactory's "dynamic" loader from the extra_config docs/integrations.md
gives, parsed by SGLang's own parser, and its own threads run the storage calls (prefetch:
batch_exists, then batch_get_v1 or batch_get into host slots; backup: batch_set_v1 or
batch_set). This file plays the radix cache's part only: it picks the tokens, allocates host
slots for a hit and drains the controller's queues, as the scheduler does. Pages are compared
byte for byte through the host pool's own get_data_page. Two attention context-parallel ranks
run as two processes of one gloo group, the group SGLang reads the CP rank from.
"""

import datetime
import itertools
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from sglang.srt.mem_cache.allocator.paged import PagedTokenToKVPoolAllocator
from sglang.srt.mem_cache.base_prefix_cache import CacheRequestHandle
from sglang.srt.mem_cache.hicache_storage import PoolHitPolicy, PoolName, PoolTransfer
from sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller import HybridCacheController
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, MLATokenToKVPool
from sglang.srt.mem_cache.pool_host.group import HostPoolGroup, PoolEntry
from sglang.srt.mem_cache.pool_host.mha import (AsymmetricMHATokenToKVPoolHost,
                                                MHATokenToKVPoolHost)
from sglang.srt.mem_cache.pool_host.mla import MLATokenToKVPoolHost
from sglang.srt.mem_cache.utils import get_storage_hash_str
from sglang.srt.runtime_context import get_parallel

from kvtier.integrations.sglang import KvtierHiCacheStorage
from store_cluster import running_cluster
from test_sglang_factory import docs_extra_config

PAGE = 4        # tokens per page
LAYERS = 3
TOKENS = 64     # device pool size
DTYPE = torch.bfloat16
WAIT_S = 20
_requests = itertools.count()


@pytest.fixture(scope="module")
def cluster():
    with running_cluster(500, segment="128MB") as c:
        yield c


def device_pool(kind):
    if kind == "mla":
        return MLATokenToKVPool(TOKENS, PAGE, DTYPE, kv_lora_rank=8, qk_rope_head_dim=4,
                                layer_num=LAYERS, device="cpu", enable_memory_saver=False)
    v_head_dim = 4 if kind == "mha-kv-split" else None  # K and V of different widths
    return MHATokenToKVPool(TOKENS, PAGE, DTYPE, head_num=2, head_dim=8, layer_num=LAYERS,
                            device="cpu", enable_memory_saver=False, v_head_dim=v_head_dim)


def host_pool(device, kind, layout):
    common = dict(pin_memory=False, device="cpu", device_capacity_tokens=TOKENS, start_layer=0,
                  end_layer=LAYERS)
    if kind == "mla":
        return MLATokenToKVPoolHost(device._mla_buffer_info(), 2.0, 0, PAGE, layout,
                                    target_layer_num=LAYERS, **common)
    cls = AsymmetricMHATokenToKVPoolHost if kind == "mha-kv-split" else MHATokenToKVPoolHost
    return cls(device._mha_buffer_info(), 2.0, 0, PAGE, layout, **common)


class Engine:
    """One SGLang rank's HiCache side: device pool, host pool, HybridCacheController with the
    kvtier backend attached (SGLang's threads running)."""

    def __init__(self, extra_config, kind="mha", layout="page_first", model="tiny", swa=False,
                 attn_cp_group=None, **ranks):
        """attn_cp_group: the attention context-parallel process group (SGLang passes its gloo
        group; the controller takes this rank's attn_cp_rank and attn_cp_size from it)."""
        self.kind = kind
        self.device = device_pool(kind)
        self.host = host_pool(self.device, kind, layout)
        allocator = PagedTokenToKVPoolAllocator(TOKENS, PAGE, DTYPE, "cpu", self.device, False)
        entries = [PoolEntry(PoolName.KV, self.host, self.device, lambda layer: layer,
                             is_primary_index_anchor=True)]
        if swa:  # a hybrid model's sliding-window layers: their own MHA pools
            swa_device = device_pool("mha")
            self.swa_host = host_pool(swa_device, "mha", layout)
            entries.append(PoolEntry(PoolName.SWA, self.swa_host, swa_device,
                                     lambda layer: layer))
        group = HostPoolGroup(entries)
        self.controller = HybridCacheController(allocator, group, PAGE, None, threading.Event(),
                                                attn_cp_group=attn_cp_group, io_backend="direct")
        parallel = dict(tp_rank=0, tp_size=1, pp_rank=0, pp_size=1, attn_dcp_size=1,
                        attn_dcp_rank=0)
        parallel.update(ranks)
        with get_parallel().override(**parallel):  # what SGLang's launcher publishes per rank
            self.controller.attach_storage_backend("dynamic", prefetch_threshold=PAGE,
                                                   model_name=model,
                                                   storage_backend_extra_config=extra_config,
                                                   host_pools=group.entries)
        assert isinstance(self.controller.storage_backend, KvtierHiCacheStorage)

    @property
    def backend(self):
        return self.controller.storage_backend

    def fill(self, pages):
        """Random bytes in `pages` host pages; their slots."""
        slots = self.host.alloc(pages * PAGE)
        for start in slots[::PAGE].tolist():
            if self.kind == "mha-kv-split":
                for buffer in self.host.kv_buffer:  # page_first: [slot, layer, head, dim]
                    buffer[start:start + PAGE] = torch.randn(buffer[start:start + PAGE].shape)
            else:
                page = self.host.get_dummy_flat_data_page()
                self.host.set_from_flat_data_page(start, torch.randn(page.shape).to(DTYPE))
        return slots

    def page_bytes(self, start):
        if self.kind == "mha-kv-split":
            return torch.cat([b[start:start + PAGE].flatten() for b in self.host.kv_buffer])
        return self.host.get_data_page(start).clone()

    def backup(self, tokens, slots, extra_pools=None):
        """write_storage as the radix cache calls it; the tokens SGLang's backup thread stored."""
        hashes = get_storage_hash_str(tokens, None, page_size=PAGE)
        op_id = self.controller.write_storage(slots, tokens, hash_value=hashes,
                                              extra_pools=extra_pools)
        done = self.controller.ack_backup_queue.get(timeout=WAIT_S)
        assert done.id == op_id
        return done.completed_tokens

    def prefetch(self, tokens, extra_pools=None, pool_slots=None):
        """prefetch, then the scheduler's part (host slots for the hit, into prefetch_buffer),
        until the controller's last ack: (tokens hit, tokens loaded, their host slots), and
        with `extra_pools` the extra pools' hits from the acks."""
        op = self.controller.prefetch(CacheRequestHandle(f"r{next(_requests)}", 0), tokens,
                                      extra_pools=extra_pools)
        hit = self.controller.prefetch_hit_queue.get(timeout=WAIT_S)
        assert hit is op
        self.last_query = dict(hit.query_pool_hit_pages)
        if hit.storage_hit_count == 0:
            return 0, 0, None
        hit.host_indices = self.host.alloc(hit.storage_hit_count)
        for transfer in hit.pool_transfers or []:
            transfer.host_indices = pool_slots[transfer.name]
        self.controller.prefetch_buffer.put(hit)
        loaded, self.pool_hits = 0, {}
        while True:
            ack = self.controller.ack_prefetch_queue.get(timeout=WAIT_S)
            if ack.completed_tokens is not None:
                loaded = ack.completed_tokens
            self.pool_hits.update(ack.pool_hits or {})
            if ack.completed_req:
                return hit.storage_hit_count, loaded, hit.host_indices

    def close(self):
        self.controller.detach_storage_backend()


@pytest.fixture
def engines():
    made = []

    def make(*args, **kwargs):
        made.append(Engine(*args, **kwargs))
        return made[-1]

    yield make
    for engine in made:
        engine.close()


def config_for(cluster, mode, test_name, **changes):
    extra = docs_extra_config(cluster, mode)
    extra["key_prefix"] = f"{test_name}/"
    extra.update(changes)
    return extra


def prompt(seed, pages):
    return [seed * 1000 + i for i in range(pages * PAGE)]


def assert_same_pages(reader, dst, writer, src):
    for d, s in zip(dst[::PAGE].tolist(), src[::PAGE].tolist()):
        assert torch.equal(reader.page_bytes(d).view(torch.uint8),
                           writer.page_bytes(s).view(torch.uint8)), (d, s)


CASES = [("mha", "page_first"), ("mha", "layer_first"), ("mha", "page_first_direct"),
         ("mla", "page_first"), ("mla", "layer_first"), ("mha-kv-split", "page_first")]


@pytest.mark.parametrize("mode", ["dummy", "embedded"])
@pytest.mark.parametrize("kind,layout", CASES)
def test_backup_then_prefetch_every_byte(cluster, engines, request, mode, kind, layout):
    extra = config_for(cluster, mode, request.node.name)
    writer = engines(dict(extra), kind, layout)
    tokens = prompt(1, 3)
    src = writer.fill(3)
    assert writer.backup(tokens, src) == 3 * PAGE
    # Another engine (a restart, or another replica) finds the prefix, but not the page after.
    reader = engines(dict(extra), kind, layout)
    hit, loaded, dst = reader.prefetch(tokens + prompt(2, 1))
    assert (hit, loaded) == (3 * PAGE, 3 * PAGE)
    assert_same_pages(reader, dst, writer, src)
    assert reader.prefetch(prompt(3, 2))[0] == 0


@pytest.mark.parametrize("kind,layout", [("mha", "page_first"), ("mha", "layer_first"),
                                         ("mla", "page_first")])
def test_without_interface_v1_pages_hit_and_load(cluster, engines, request, kind, layout):
    # SGLang without interface_v1 backs up and loads flat pages (batch_set / batch_get) after a
    # batch_exists: MHA pages must hit, and both interfaces must find each other's pages.
    generic = config_for(cluster, "dummy", request.node.name)
    del generic["interface_v1"]
    zero_copy = config_for(cluster, "dummy", request.node.name)
    writer = engines(dict(generic), kind, layout)
    assert writer.controller.page_set_func == writer.controller._generic_page_set
    tokens = prompt(4, 2)
    src = writer.fill(2)
    assert writer.backup(tokens, src) == 2 * PAGE
    for extra in (generic, zero_copy):
        reader = engines(dict(extra), kind, layout)
        hit, loaded, dst = reader.prefetch(tokens)
        assert (hit, loaded) == (2 * PAGE, 2 * PAGE)
        assert_same_pages(reader, dst, writer, src)
    # And pages a zero-copy engine stored load through the generic calls.
    v1_writer = engines(dict(zero_copy), kind, layout)
    more = prompt(5, 2)
    src = v1_writer.fill(2)
    assert v1_writer.backup(more, src) == 2 * PAGE
    reader = engines(dict(generic), kind, layout)
    hit, loaded, dst = reader.prefetch(more)
    assert (hit, loaded) == (2 * PAGE, 2 * PAGE)
    assert_same_pages(reader, dst, v1_writer, src)


@pytest.mark.parametrize("kind", ["mha", "mla"])
def test_pipeline_stages_read_only_their_own_pages(cluster, engines, request, kind):
    extra = config_for(cluster, "dummy", request.node.name)
    stages = [engines(dict(extra), kind, pp_rank=rank, pp_size=2) for rank in (0, 1)]
    tokens = prompt(6, 2)
    sources = [stage.fill(2) for stage in stages]
    assert stages[0].backup(tokens, sources[0]) == 2 * PAGE  # stage 1 has not stored yet
    assert stages[1].prefetch(tokens)[0] == 0
    assert stages[1].backup(tokens, sources[1]) == 2 * PAGE
    for rank, stage in enumerate(stages):
        reader = engines(dict(extra), kind, pp_rank=rank, pp_size=2)
        hit, loaded, dst = reader.prefetch(tokens)
        assert (hit, loaded) == (2 * PAGE, 2 * PAGE)
        assert_same_pages(reader, dst, stage, sources[rank])
    assert engines(dict(extra), kind).prefetch(tokens)[0] == 0  # no pipeline: other layers


def test_tensor_parallel_ranks_and_sizes_read_only_their_own_heads(cluster, engines, request):
    extra = config_for(cluster, "dummy", request.node.name)
    ranks = [engines(dict(extra), "mha", tp_rank=rank, tp_size=2) for rank in (0, 1)]
    tokens = prompt(7, 2)
    sources = [rank.fill(2) for rank in ranks]
    assert ranks[0].backup(tokens, sources[0]) == 2 * PAGE
    assert ranks[1].prefetch(tokens)[0] == 0
    assert engines(dict(extra), "mha", tp_rank=0, tp_size=4).prefetch(tokens)[0] == 0
    assert ranks[1].backup(tokens, sources[1]) == 2 * PAGE
    for rank in (0, 1):
        reader = engines(dict(extra), "mha", tp_rank=rank, tp_size=2)
        hit, loaded, dst = reader.prefetch(tokens)
        assert (hit, loaded) == (2 * PAGE, 2 * PAGE)
        assert_same_pages(reader, dst, ranks[rank], sources[rank])


def context_parallel_rank(rank, rendezvous, extra, out):
    """One of two SGLang ranks that differ only in their attention context-parallel rank (TP 0
    of 1 on both), in a process of its own: SGLang takes attn_cp_rank from the rank of this
    process in the attention CP group (HiCacheController.get_attn_cp_rank_and_size), and its
    prefetch agrees on the hit with the other rank (an all-reduce MIN over that group). Rank 1
    backs up a prefix first; both look it up; then rank 0 backs up its own bytes and a new
    engine on each rank loads the prefix. Writes what it saw to `out` (JSON)."""
    dist = torch.distributed
    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=2,
                            timeout=datetime.timedelta(seconds=3 * WAIT_S))
    group = dist.new_group([0, 1], backend="gloo")  # SGLang: parallel.attn_cp_group.cpu_group
    seen = {}
    try:
        for seed, kind in enumerate(("mha", "mla"), start=11):
            tokens = prompt(seed, 2)
            writer = Engine(dict(extra), kind, attn_cp_group=group)
            config = writer.controller.storage_config
            src = writer.fill(2)
            if rank == 1:
                assert writer.backup(tokens, src) == 2 * PAGE
            dist.barrier()
            foreign = writer.prefetch(tokens)[0]  # rank 0 has nothing of its own yet
            if rank == 0:
                assert writer.backup(tokens, src) == 2 * PAGE
            dist.barrier()
            reader = Engine(dict(extra), kind, attn_cp_group=group)  # a restarted rank
            hit, loaded, dst = reader.prefetch(tokens)
            same = dst is not None and all(
                torch.equal(reader.page_bytes(d).view(torch.uint8),
                            writer.page_bytes(s).view(torch.uint8))
                for d, s in zip(dst[::PAGE].tolist(), src[::PAGE].tolist()))
            seen[kind] = {"cp": [config.attn_cp_rank, config.attn_cp_size],
                          "foreign_hit": foreign, "hit": hit, "loaded": loaded,
                          "own_bytes": same}
            dist.barrier()  # neither rank detaches while the other still prefetches
            reader.close()
            writer.close()
    finally:
        Path(out).write_text(json.dumps(seen))
        dist.destroy_process_group()


def test_context_parallel_ranks_read_only_their_own_pages(cluster, request, tmp_path):
    extra = config_for(cluster, "dummy", request.node.name)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "python"), env.get("PYTHONPATH", "")])
    procs, logs = [], [tmp_path / f"rank{rank}.log" for rank in (0, 1)]
    try:
        for rank in (0, 1):
            with open(logs[rank], "w") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, __file__, str(rank), str(tmp_path / "rendezvous"),
                     json.dumps(extra), str(tmp_path / f"rank{rank}.json")],
                    env=env, stdout=log, stderr=subprocess.STDOUT))
        codes = [p.wait(timeout=10 * WAIT_S) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    tails = "\n".join(f"rank {r}: ...{logs[r].read_text()[-3000:]}" for r in (0, 1))
    assert codes == [0, 0], tails
    for rank in (0, 1):
        seen = json.loads((tmp_path / f"rank{rank}.json").read_text())
        for kind in ("mha", "mla"):
            assert seen[kind] == {"cp": [rank, 2], "foreign_hit": 0, "hit": 2 * PAGE,
                                  "loaded": 2 * PAGE, "own_bytes": True}, (rank, kind, tails)


def test_mla_pages_written_once_read_by_every_rank(cluster, engines, request):
    extra = config_for(cluster, "dummy", request.node.name)
    ranks = [engines(dict(extra), "mla", tp_rank=rank, tp_size=2) for rank in (0, 1)]
    tokens = prompt(8, 2)
    other = ranks[1].fill(2)
    ranks[1].backup(tokens, other)  # SGLang skips the backup on every rank but one
    assert ranks[1].prefetch(tokens)[0] == 0
    src = ranks[0].fill(2)
    assert ranks[0].backup(tokens, src) == 2 * PAGE
    hit, loaded, dst = ranks[1].prefetch(tokens)
    assert (hit, loaded) == (2 * PAGE, 2 * PAGE)
    assert_same_pages(ranks[1], dst, ranks[0], src)


def test_pages_of_another_host_layout_miss(cluster, engines, request):
    extra = config_for(cluster, "dummy", request.node.name)
    writer = engines(dict(extra), "mha", "page_first")
    tokens = prompt(9, 2)
    assert writer.backup(tokens, writer.fill(2)) == 2 * PAGE
    assert engines(dict(extra), "mha", "layer_first").prefetch(tokens)[0] == 0


def test_hybrid_model_window_pool_through_the_v2_calls(cluster, engines, request):
    # A sliding-window model keeps only a prefix's last pages of SWA KV: SGLang backs them up
    # with batch_set_v2, asks batch_exists_v2 with a trailing_pages policy, loads with
    # batch_get_v2.
    extra = config_for(cluster, "dummy", request.node.name)
    writer = engines(dict(extra), swa=True)
    tokens = prompt(10, 3)
    hashes = get_storage_hash_str(tokens, None, page_size=PAGE)
    src = writer.fill(3)
    window = writer.swa_host.alloc(PAGE)
    page = writer.swa_host.get_dummy_flat_data_page()
    writer.swa_host.set_from_flat_data_page(int(window[0]), torch.randn(page.shape).to(DTYPE))
    tail = PoolTransfer(name=PoolName.SWA, host_indices=window, keys=hashes[-1:],
                        hit_policy=PoolHitPolicy.TRAILING_PAGES)
    assert writer.backup(tokens, src, extra_pools=[tail]) == 3 * PAGE

    reader = engines(dict(extra), swa=True)
    slots = reader.swa_host.alloc(PAGE)
    want = PoolTransfer(name=PoolName.SWA, keys=[None], hit_policy=PoolHitPolicy.TRAILING_PAGES)
    hit, loaded, dst = reader.prefetch(tokens, [want], {PoolName.SWA: slots})
    assert (hit, loaded) == (3 * PAGE, 3 * PAGE)
    assert reader.last_query == {PoolName.KV: 3, PoolName.SWA: 3}
    assert reader.pool_hits[PoolName.SWA] == 1
    assert_same_pages(reader, dst, writer, src)
    assert torch.equal(reader.swa_host.get_data_page(int(slots[0])),
                       writer.swa_host.get_data_page(int(window[0])))
    # Two pages of the prefix without their window: no restorable prefix ends there.
    want = PoolTransfer(name=PoolName.SWA, keys=[None], hit_policy=PoolHitPolicy.TRAILING_PAGES)
    assert reader.prefetch(tokens[:2 * PAGE], [want], {})[0] == 0


if __name__ == "__main__":  # a rank of test_context_parallel_ranks_read_only_their_own_pages
    context_parallel_rank(int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), sys.argv[4])
