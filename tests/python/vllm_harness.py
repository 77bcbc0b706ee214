"""Drives a vLLM KV connector the way vLLM v1 does, without vLLM.

Stand-ins carry the attribute names vLLM's objects have (Request, KVCacheBlocks, NewRequestData,
CachedRequestData, SchedulerOutput, KVConnectorOutput, ForwardContext, VllmConfig and its parts);
``MiniEngine`` is a small scheduler plus model runner that makes the connector calls in vLLM's
order (docs/integrations.md; the facts come from vLLM's scheduler.py and
kv_connector_model_runner_mixin.py):

  schedule():  running requests first, then waiting ones: get_num_new_matched_tokens (only when
               num_computed_tokens == 0) -> allocate -> update_state_after_alloc; then
               build_connector_meta once; then num_computed_tokens += num_scheduled.
  execute():   per worker, as vLLM 0.34's model runner (v1/worker/*/kv_connector.py):
               handle_preemptions(metadata), bind_connector_metadata, start_load_kv before the
               forward only when the step has a synchronous load (has_sync_kv_loads), else after
               it; wait_for_save (every step, empty ones too), get_finished,
               get_block_ids_with_load_errors, clear_connector_metadata.
  update():    failed blocks cut num_computed_tokens back (the request recomputes from there and
               its sampled token is dropped); finished requests -> request_finished_all_groups (one
               group; request_finished for a connector without it) (True keeps
               the blocks until every worker reported the id in finished_sending);
               update_connector_output.

Asynchronous loads (a lookup answering (n, True)) go vLLM's way too: the request gets blocks for
its computed tokens only, update_state_after_alloc, and is parked (WAITING_FOR_REMOTE_KVS) in the
waiting queue, skipped by every schedule() until all workers have reported it in get_finished's
finished_recving (counted per worker, as vLLM's KVOutputAggregator does). The next schedule()
then sets num_computed_tokens to its blocks' tokens (or to the first failed block, from the
load errors of that or an earlier step) and schedules it without another lookup (unless nothing
was loaded: then its blocks are freed and it is looked up again). Aborting a parked request keeps
its blocks until the report. Steps keep running, with nothing scheduled, while requests are
parked.

The "model" writes, for every computed token, K/V bytes that are a function of the whole token
prefix, the layer, K or V, and the TP rank (not the rank with MLA: every rank holds the same
latent KV). A token computed while the request's prefix holds wrong bytes on any rank gets random
bytes, as a real forward would produce garbage. Before each forward the engine checks every byte
of every scheduled request's computed prefix on every rank; a wrong byte in a block the connector
did not report as failed is recorded in ``engine.errors``.
"""

from __future__ import annotations

import enum
import importlib
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

# ----------------------------------------------------------------------------- vLLM stand-ins


class RequestStatus(enum.Enum):
    WAITING = enum.auto()
    WAITING_FOR_REMOTE_KVS = enum.auto()
    RUNNING = enum.auto()
    PREEMPTED = enum.auto()
    FINISHED_STOPPED = enum.auto()
    FINISHED_LENGTH_CAPPED = enum.auto()
    FINISHED_ABORTED = enum.auto()


@dataclass
class ModelConfig:
    model: str
    dtype: Any = torch.float16
    use_mla: bool = False


@dataclass
class CacheConfig:
    block_size: int = 16
    cache_dtype: str = "auto"


@dataclass
class ParallelConfig:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    rank: int = 0

    @property
    def world_size(self):
        return self.tensor_parallel_size * self.pipeline_parallel_size


@dataclass
class KVTransferConfig:
    kv_connector: str = "KvtierConnector"
    kv_connector_module_path: str = "kvtier.integrations.vllm"
    kv_role: str = "kv_both"
    kv_connector_extra_config: dict = field(default_factory=dict)
    engine_id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def get_from_extra_config(self, key, default):
        return self.kv_connector_extra_config.get(key, default)

    @property
    def is_kv_producer(self):
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_kv_consumer(self):
        return self.kv_role in ("kv_consumer", "kv_both")


@dataclass
class VllmConfig:
    model_config: ModelConfig
    cache_config: CacheConfig
    parallel_config: ParallelConfig
    kv_transfer_config: KVTransferConfig


class Request:
    def __init__(self, request_id, prompt_token_ids, max_tokens=1, cache_salt=None,
                 lora_request=None, mm_features=None):
        self.request_id = request_id
        self.prompt_token_ids = list(prompt_token_ids)
        self._all_token_ids = list(prompt_token_ids)
        self.num_prompt_tokens = len(prompt_token_ids)
        self.num_computed_tokens = 0
        self.num_cached_tokens = -1
        self.num_external_computed_tokens = 0
        self.status = RequestStatus.WAITING
        self.cache_salt = cache_salt
        self.lora_request = lora_request
        self.mm_features = mm_features or []
        self.max_tokens = max_tokens
        self.num_preemptions = 0
        self.kv_transfer_params = None

    @property
    def all_token_ids(self):
        return tuple(self._all_token_ids)

    @property
    def output_token_ids(self):
        return tuple(self._all_token_ids[self.num_prompt_tokens:])

    @property
    def num_output_tokens(self):
        return len(self._all_token_ids) - self.num_prompt_tokens

    @property
    def num_tokens(self):
        return len(self._all_token_ids)


@dataclass
class KVCacheBlock:
    block_id: int


class KVCacheBlocks:
    def __init__(self, block_ids):
        self.blocks = ([KVCacheBlock(b) for b in block_ids],)

    def get_block_ids(self, allow_none=False):
        return tuple([b.block_id for b in group] for group in self.blocks)


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: list
    mm_features: list
    sampling_params: Any
    pooling_params: Any
    block_ids: tuple
    num_computed_tokens: int
    lora_request: Any


@dataclass
class CachedRequestData:
    req_ids: list = field(default_factory=list)
    resumed_req_ids: set = field(default_factory=set)
    new_token_ids: list = field(default_factory=list)
    all_token_ids: dict = field(default_factory=dict)
    new_block_ids: list = field(default_factory=list)
    num_computed_tokens: list = field(default_factory=list)
    num_output_tokens: list = field(default_factory=list)


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict
    scheduled_encoder_inputs: dict
    num_common_prefix_blocks: list
    finished_req_ids: set
    free_encoder_mm_hashes: list
    preempted_req_ids: set | None = None
    kv_connector_metadata: Any = None
    has_sync_kv_loads: bool = False


@dataclass
class KVConnectorOutput:
    finished_sending: set | None = None
    finished_recving: set | None = None
    invalid_block_ids: set = field(default_factory=set)


@dataclass
class ForwardContext:
    no_compile_layers: dict
    attn_metadata: Any
    virtual_engine: int = 0


@dataclass
class FullAttentionSpec:  # vllm.v1.kv_cache_interface (MLAAttentionSpec with use_mla)
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: Any
    use_mla: bool = False


@dataclass
class SlidingWindowSpec:  # vllm.v1.kv_cache_interface: blocks behind the window are freed
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: Any
    sliding_window: int


@dataclass
class KVCacheGroupSpec:
    layer_names: list
    kv_cache_spec: FullAttentionSpec


@dataclass
class KVCacheConfig:
    num_blocks: int
    kv_cache_tensors: list
    kv_cache_groups: list


@dataclass
class MMFeature:  # vLLM's MultiModalFeatureSpec, the parts a connector reads
    identifier: str
    mm_position: Any


@dataclass
class PlaceholderRange:
    offset: int
    length: int


def make_config(model, block_size=16, tp=1, rank=0, use_mla=False, extra=None,
                kv_role="kv_both", engine_id=None, dtype=torch.float16):
    ktc = KVTransferConfig(kv_role=kv_role, kv_connector_extra_config=dict(extra or {}))
    if engine_id:
        ktc.engine_id = engine_id
    return VllmConfig(ModelConfig(model=model, dtype=dtype, use_mla=use_mla),
                      CacheConfig(block_size=block_size),
                      ParallelConfig(tensor_parallel_size=tp, rank=rank), ktc)


def load_connector_class(vllm_config):
    """What vLLM's KVConnectorFactory does for a connector outside its registry."""
    ktc = vllm_config.kv_transfer_config
    module = importlib.import_module(ktc.kv_connector_module_path)
    return getattr(module, ktc.kv_connector)


def make_connector(vllm_config, role_name, kv_cache_config=None):
    cls = load_connector_class(vllm_config)
    role_enum = importlib.import_module(
        vllm_config.kv_transfer_config.kv_connector_module_path).KVConnectorRole
    return cls(vllm_config, role_enum[role_name], kv_cache_config)


# ----------------------------------------------------------------------------- the "model"

_M = np.uint64(0x9E3779B97F4A7C15)


def _splitmix(x):
    x = x + _M
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def expected_kv(tokens, a, b, seed, nbytes):
    """uint8 [b - a, nbytes]: the K/V bytes of positions [a, b) of `tokens`, for one
    (layer, K/V, rank) `seed`; each depends on the whole prefix up to its position."""
    t = np.asarray(tokens[:b], dtype=np.uint64) + np.uint64(1)
    with np.errstate(over="ignore"):
        powers = np.cumprod(np.full(b, np.uint64(1099511628211), dtype=np.uint64))
        fp = np.cumsum(t * powers, dtype=np.uint64)[a:b]
        words = -(-nbytes // 8)
        x = (fp[:, None] ^ np.uint64(seed * 0x2545F4914F6CDD1D & (2**64 - 1))
             ^ (np.arange(words, dtype=np.uint64)[None, :] * np.uint64(0xD6E8FEB86659FD93)))
        out = _splitmix(x)
    return np.ascontiguousarray(out).view(np.uint8).reshape(b - a, words * 8)[:, :nbytes]


class RankCache:
    """One worker's paged KV tensors in vLLM's shape for `kind`, and byte access to tokens."""

    def __init__(self, kind, layers, num_blocks, block_size, heads, head_dim, hnd=False,
                 dtype=torch.float16, kernel_block=None, alloc=None):
        """alloc(shape, dtype) makes each layer's zeroed tensor (default: torch.zeros)."""
        self.kind, self.block_size = kind, block_size
        zeros = alloc or (lambda shape, dtype: torch.zeros(shape, dtype=dtype))
        kb = kernel_block or block_size
        r = block_size // kb
        nbk = num_blocks * r
        self.kernel_block, self.ratio = kb, r
        self.tensors = {}
        for layer in range(layers):
            if kind == "mla":
                t = zeros((nbk, kb, head_dim), dtype)
            elif kind == "cpu":  # vLLM's CPU backend: heads before tokens in the shape itself
                t = zeros((2, nbk, heads, kb, head_dim), dtype)
            elif kind == "flash_attn":
                if hnd:  # vLLM allocates the physical shape and hands out a permuted view
                    t = zeros((2, nbk, heads, kb, head_dim), dtype).permute(0, 1, 3, 2, 4)
                else:
                    t = zeros((2, nbk, kb, heads, head_dim), dtype)
            else:
                if hnd:
                    t = zeros((nbk, 2, heads, kb, head_dim), dtype).permute(0, 1, 3, 2, 4)
                else:
                    t = zeros((nbk, 2, kb, heads, head_dim), dtype)
            self.tensors[f"model.layers.{layer}.self_attn.attn"] = t
        self.regions = []  # uint8 views [kernel blocks, kb, bytes] per (layer, K/V)
        for t in self.tensors.values():
            parts = ([t] if kind == "mla" else [t[0], t[1]] if kind == "flash_attn"
                     else [t[:, 0], t[:, 1]] if kind == "flashinfer"
                     else [t[0].permute(0, 2, 1, 3), t[1].permute(0, 2, 1, 3)])
            for p in parts:
                u8 = p.view(torch.uint8)  # last dim has stride 1 in every layout
                self.regions.append(u8.reshape(u8.shape[0], kb, -1) if kind == "mla"
                                    else u8.flatten(2) if u8.is_contiguous() else u8)
        first = self.regions[0]
        self.bytes_per_token = int(np.prod(first.shape[2:]))
        self.device = first.device  # cpu, or cuda for the GPU path's tests

    def _index(self, block_ids, a, b):
        pos = np.arange(a, b)
        blocks = np.asarray(block_ids, dtype=np.int64)[pos // self.block_size]
        kblocks = blocks * self.ratio + (pos % self.block_size) // self.kernel_block
        return (torch.from_numpy(kblocks).to(self.device),
                torch.from_numpy(pos % self.kernel_block).to(self.device))

    def write(self, block_ids, a, b, data_per_region):
        bi, oi = self._index(block_ids, a, b)
        for reg, data in zip(self.regions, data_per_region):
            reg[bi, oi] = torch.from_numpy(np.ascontiguousarray(data)).reshape(
                (b - a,) + tuple(reg.shape[2:])).to(self.device)

    def read(self, block_ids, a, b):
        bi, oi = self._index(block_ids, a, b)
        return [reg[bi, oi].reshape(b - a, -1).cpu().numpy().copy() for reg in self.regions]

    def poison(self, block_ids, rng):
        if not block_ids:
            return
        ids = np.asarray(block_ids, dtype=np.int64)
        idx = torch.from_numpy((ids[:, None] * self.ratio + np.arange(self.ratio)).reshape(-1))
        idx = idx.to(self.device)
        for reg in self.regions:
            shape = (idx.numel(),) + tuple(reg.shape[1:])
            reg[idx] = torch.from_numpy(rng.integers(0, 256, shape, dtype=np.uint8)).to(self.device)


# ----------------------------------------------------------------------------- the engine


@dataclass
class Worker:
    rank: int
    connector: Any
    cache: RankCache


class MiniEngine:
    def __init__(self, model, kind="flash_attn", tp=1, num_blocks=96, block_size=16, layers=2,
                 heads=2, head_dim=8, extra=None, hnd=False, token_budget=1 << 30,
                 kernel_block=None, kv_role="kv_both", seed=0, alloc=None):
        self.kind, self.tp, self.block_size = kind, tp, block_size
        self.mla = kind == "mla"
        self.token_budget = token_budget
        self.rng = np.random.default_rng(seed)
        engine_id = str(uuid.uuid4())
        cfg = dict(model=model, block_size=block_size, tp=tp, use_mla=self.mla, extra=extra,
                   kv_role=kv_role, engine_id=engine_id)
        layer_names = [f"model.layers.{i}.self_attn.attn" for i in range(layers)]
        spec = FullAttentionSpec(block_size, 1 if self.mla else heads, head_dim, torch.float16,
                                 use_mla=self.mla)
        kv_cache_config = KVCacheConfig(num_blocks, [], [KVCacheGroupSpec(layer_names, spec)])
        self.scheduler = make_connector(make_config(rank=0, **cfg), "SCHEDULER", kv_cache_config)
        self.workers = []
        for rank in range(tp):
            conn = make_connector(make_config(rank=rank, **cfg), "WORKER", kv_cache_config)
            cache = RankCache(kind, layers, num_blocks, block_size, heads, head_dim, hnd=hnd,
                              kernel_block=kernel_block, alloc=alloc)
            conn.register_kv_caches(dict(cache.tensors))
            self.workers.append(Worker(rank, conn, cache))
        self.free = deque(range(num_blocks))
        self.num_blocks = num_blocks
        self.requests: dict[str, Request] = {}
        self.blocks: dict[str, list] = {}
        self.waiting: deque = deque()
        self.running: list = []
        self.held: dict[str, list] = {}  # delay-free: blocks kept for a pending save
        self._sending_counts: dict[str, int] = {}
        self._finished_since: set = set()
        self._preempted: set = set()
        self.local_hits: dict[str, int] = {}
        self.errors: list = []
        self.steps: list = []  # per step: dict of what happened
        self.snapshots: dict[str, list] = {}  # rid -> per rank bytes of its prompt at finish
        self.finished: list = []
        self.finished_blocks: dict[str, list] = {}  # rid -> the blocks it held
        self.connector_delays: dict[str, bool] = {}  # rid -> what request_finished answered
        self._recv_counts: dict[str, int] = {}  # async loads: workers that reported them
        self._owed = [set() for _ in self.workers]  # per worker: async loads not reported yet
        self._recv_ready: set = set()  # reported by every worker; runnable at the next step
        self._failed_recving: set = set()  # parked requests that had failed blocks

    # ------------------------------------------------------------------ requests

    def add(self, rid, prompt, max_tokens=1, local_hit=0, **kw):
        req = Request(rid, prompt, max_tokens=max_tokens, **kw)
        self.requests[rid] = req
        self.local_hits[rid] = local_hit
        self.waiting.append(req)
        return req

    def abort(self, rid):
        req = self.requests[rid]
        if req in self.waiting:
            self.waiting.remove(req)
        if req in self.running:
            self.running.remove(req)
        # vLLM keeps a parked request's blocks until its load is reported, whatever the
        # connector answers.
        parked = (req.status == RequestStatus.WAITING_FOR_REMOTE_KVS
                  and rid not in self._recv_ready)
        self._recv_ready.discard(rid)
        self._failed_recving.discard(rid)
        req.status = RequestStatus.FINISHED_ABORTED
        self._finish(req, delay=parked)

    def parked(self):
        return [r.request_id for r in self.waiting
                if r.status == RequestStatus.WAITING_FOR_REMOTE_KVS]

    def preempt(self, rid):
        req = self.requests[rid]
        self.running.remove(req)
        self._free(self.blocks.pop(rid, []))
        req.status = RequestStatus.PREEMPTED
        req.num_computed_tokens = 0
        req.num_preemptions += 1
        self.local_hits[rid] = 0
        self.waiting.appendleft(req)
        self._preempted.add(rid)

    # ------------------------------------------------------------------ blocks

    def _alloc(self, n):
        assert len(self.free) >= n, "the test engine ran out of blocks"
        out = [self.free.popleft() for _ in range(n)]
        for w in self.workers:
            w.cache.poison(out, self.rng)  # a load must really write these
        return out

    def _free(self, blocks):
        self.free.extend(blocks)

    def _ensure_blocks(self, rid, n_tokens):
        have = self.blocks.setdefault(rid, [])
        need = -(-n_tokens // self.block_size) - len(have)
        new = self._alloc(need) if need > 0 else []
        have.extend(new)
        return new

    # ------------------------------------------------------------------ kv content

    def seed(self, region, rank):
        return region * 1000 + (0 if self.mla else rank) + 1

    def expected(self, req, a, b, rank):
        tokens = req.all_token_ids
        nregions = len(self.workers[0].cache.regions)
        nb = self.workers[0].cache.bytes_per_token
        return [expected_kv(tokens, a, b, self.seed(r, rank), nb) for r in range(nregions)]

    def prefix_ok(self, rid, rank, end):
        """Whether tokens [0, end) of rid hold the model's bytes on `rank`; returns the first
        wrong block index or None."""
        req, blocks = self.requests[rid], self.blocks[rid]
        if end == 0:
            return None
        got = self.workers[rank].cache.read(blocks, 0, end)
        want = self.expected(req, 0, end, rank)
        bad = None
        for g, w in zip(got, want):
            rows = np.nonzero((g != w).any(axis=1))[0]
            if rows.size:
                first = int(rows[0]) // self.block_size
                bad = first if bad is None else min(bad, first)
        return bad

    # ------------------------------------------------------------------ one step

    def step(self):
        sched = self.scheduler
        bs = self.block_size
        budget = self.token_budget
        new_reqs, cached = [], CachedRequestData()
        num_sched, info = {}, {"matched": {}, "loads": [], "saves": []}
        for req in list(self.running):
            n = min(req.num_tokens - req.num_computed_tokens, budget)
            if n <= 0:
                continue
            new = self._ensure_blocks(req.request_id, req.num_computed_tokens + n)
            cached.req_ids.append(req.request_id)
            cached.new_block_ids.append((new,) if new else None)
            cached.num_computed_tokens.append(req.num_computed_tokens)
            cached.num_output_tokens.append(req.num_output_tokens)
            cached.new_token_ids.append([])
            num_sched[req.request_id] = n
            budget -= n
        info["parked"], info["ready"] = [], []
        sync_loads = False
        skipped = []
        while self.waiting and budget > 0:
            req = self.waiting[0]
            rid = req.request_id
            if req.status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                if rid not in self._recv_ready:
                    skipped.append(self.waiting.popleft())
                    continue
                self._recv_ready.discard(rid)
                self._remote_kvs_done(req)
                req.status = (RequestStatus.PREEMPTED if req.num_preemptions
                              else RequestStatus.WAITING)
                info["ready"].append(rid)
            local, ext, is_async = 0, 0, False
            if req.num_computed_tokens == 0:
                local = self.local_hits.get(rid, 0)
                ext, is_async = sched.get_num_new_matched_tokens(req, local)
                again = sched.get_num_new_matched_tokens(req, local)  # vLLM may ask again
                assert again == (ext, is_async), "get_num_new_matched_tokens is not repeatable"
                assert is_async in (True, False) and not (is_async and ext == 0)
                assert ext >= 0 and (local + ext) % bs == 0, (local, ext)
                assert local + ext <= req.num_tokens - 1, "the last token must be recomputed"
                computed = local + ext
                req.num_external_computed_tokens = ext
                sync_loads |= ext > 0 and not is_async
                info["matched"][rid] = ext
            else:  # its async load is done: no second lookup
                computed = req.num_computed_tokens
            n = 0 if is_async else min(req.num_tokens - computed, budget)
            self.waiting.popleft()
            self._ensure_blocks(rid, computed + n)
            blocks = self.blocks[rid]
            if local:  # vLLM's own prefix cache: these blocks already hold the right bytes
                for w in self.workers:
                    w.cache.write(blocks, 0, local, self.expected(req, 0, local, w.rank))
            sched.update_state_after_alloc(req, KVCacheBlocks(blocks), ext)
            if is_async:  # blocks for the computed tokens only; not scheduled until loaded
                req.status = RequestStatus.WAITING_FOR_REMOTE_KVS
                skipped.append(req)
                info["parked"].append(rid)
                continue
            if req.status == RequestStatus.PREEMPTED:
                cached.req_ids.append(rid)
                cached.resumed_req_ids.add(rid)
                cached.new_block_ids.append((list(blocks),))
                cached.num_computed_tokens.append(computed)
                cached.num_output_tokens.append(req.num_output_tokens)
                cached.new_token_ids.append([])
                cached.all_token_ids[rid] = list(req.all_token_ids)
            else:
                new_reqs.append(NewRequestData(
                    req_id=rid, prompt_token_ids=list(req.prompt_token_ids),
                    mm_features=req.mm_features, sampling_params=None, pooling_params=None,
                    block_ids=(list(blocks),), num_computed_tokens=computed,
                    lora_request=req.lora_request))
            req.status = RequestStatus.RUNNING
            req.num_computed_tokens = computed
            req.num_cached_tokens = computed
            self.running.append(req)
            num_sched[rid] = n
            budget -= n
        self.waiting.extendleft(reversed(skipped))  # back at the head, in order
        so = SchedulerOutput(
            scheduled_new_reqs=new_reqs, scheduled_cached_reqs=cached,
            num_scheduled_tokens=num_sched, total_num_scheduled_tokens=sum(num_sched.values()),
            scheduled_spec_decode_tokens={}, scheduled_encoder_inputs={},
            num_common_prefix_blocks=[0], finished_req_ids=self._finished_since,
            free_encoder_mm_hashes=[], preempted_req_ids=self._preempted,
            has_sync_kv_loads=sync_loads)
        self._finished_since, self._preempted = set(), set()
        meta = sched.build_connector_meta(so)
        assert meta is not None, "build_connector_meta must always return metadata"
        so.kv_connector_metadata = meta
        info["loads"], info["saves"] = list(meta.loads), list(meta.saves)
        for job in meta.loads:
            if job.req_id in info["parked"]:
                assert all(job.req_id not in o for o in self._owed), "a second load in flight"
                for o in self._owed:
                    o.add(job.req_id)
        assert set(info["parked"]) <= {j.req_id for j in meta.loads}, "parked without a load"
        pre = {rid: self.requests[rid].num_computed_tokens for rid in num_sched}
        for rid, n in num_sched.items():
            self.requests[rid].num_computed_tokens += n

        # ---- the workers (vLLM runs them in parallel; the order inside each is what matters)
        fc = ForwardContext(no_compile_layers={}, attn_metadata=None if not num_sched else {})
        for w in self.workers:
            w.connector.handle_preemptions(so.kv_connector_metadata)
            w.connector.bind_connector_metadata(so.kv_connector_metadata)
            if so.has_sync_kv_loads:
                w.connector.start_load_kv(fc)
        bad = {}  # rid -> first wrong block on any rank
        for rid in num_sched:
            for w in self.workers:
                b = self.prefix_ok(rid, w.rank, pre[rid])
                if b is not None:
                    bad[rid] = b if rid not in bad else min(bad[rid], b)
        for rid, n in num_sched.items():  # the forward: garbage after a wrong prefix
            req, a = self.requests[rid], pre[rid]
            for w in self.workers:
                data = (self.expected(req, a, a + n, w.rank) if rid not in bad else
                        [self.rng.integers(0, 256, (n, w.cache.bytes_per_token), dtype=np.uint8)
                         for _ in w.cache.regions])
                w.cache.write(self.blocks[rid], a, a + n, data)
        invalid, sending, recving = set(), [], set()
        for w in self.workers:
            if not so.has_sync_kv_loads:  # vLLM starts these after the forward
                w.connector.start_load_kv(fc)
            w.connector.wait_for_save()
            done_send, done_recv = w.connector.get_finished(so.finished_req_ids)
            sending.append(set(done_send or ()))
            for rid in done_recv or ():
                assert rid in self._owed[w.rank], f"rank {w.rank} reported {rid} as received"
                self._owed[w.rank].discard(rid)
                self._recv_counts[rid] = self._recv_counts.get(rid, 0) + 1
                if self._recv_counts[rid] == len(self.workers):  # KVOutputAggregator
                    del self._recv_counts[rid]
                    recving.add(rid)
            invalid |= set(w.connector.get_block_ids_with_load_errors())
            w.connector.clear_connector_metadata()
        info["invalid"], info["recving"] = invalid, recving
        for rid, b in bad.items():
            blocks = self.blocks[rid]
            reported = [i for i, blk in enumerate(blocks) if blk in invalid]
            if not reported or reported[0] > b:
                self.errors.append(f"{rid}: block {b} ({blocks[b]}) holds wrong bytes "
                                   f"and was not reported (reported {reported})")

        # ---- update_from_output
        recomputed = set()
        if invalid:
            for rid in num_sched:
                req = self.requests[rid]
                for i, blk in enumerate(self.blocks.get(rid, [])):
                    if i * bs >= req.num_cached_tokens:
                        break
                    if blk in invalid:
                        req.num_computed_tokens = i * bs
                        recomputed.add(rid)
                        break
        info["recomputed"] = recomputed
        if invalid:  # parked requests: cut at the first failed block of those being loaded
            for req in self.waiting:
                if req.status != RequestStatus.WAITING_FOR_REMOTE_KVS:
                    continue
                rid, blocks = req.request_id, self.blocks.get(req.request_id, [])
                end = (req.num_computed_tokens if rid in self._failed_recving
                       else len(blocks) * bs)
                for i, blk in enumerate(blocks[:-(-end // bs)]):
                    if blk in invalid:
                        req.num_computed_tokens = i * bs
                        self._failed_recving.add(rid)
                        break
        for rid in num_sched:
            req = self.requests[rid]
            if rid in recomputed or req.num_computed_tokens < req.num_tokens:
                continue
            req._all_token_ids.append(int(sum(req._all_token_ids[-4:]) * 31 + req.num_tokens)
                                      % 50000)
            if req.num_output_tokens >= req.max_tokens:
                self.running.remove(req)
                req.status = RequestStatus.FINISHED_LENGTH_CAPPED
                self._finish(req)
        all_sent = set().union(*sending) if sending else set()
        sched.update_connector_output(KVConnectorOutput(
            finished_sending=all_sent or None, finished_recving=recving or None,
            invalid_block_ids=invalid))
        for rid in recving:
            if self.requests[rid].status == RequestStatus.WAITING_FOR_REMOTE_KVS:
                self._recv_ready.add(rid)
            else:  # finished while its load ran: the blocks were kept for this report
                assert rid in self.held, f"{rid} reported as received but its blocks are not held"
                self._free(self.held.pop(rid))
        for s in sending:
            for rid in s:
                assert rid in self.held, f"{rid} reported as sent but its blocks are not held"
                self._sending_counts[rid] = self._sending_counts.get(rid, 0) + 1
        for rid, count in list(self._sending_counts.items()):
            if count == len(self.workers):  # every worker reported it (KVOutputAggregator)
                self._free(self.held.pop(rid))
                del self._sending_counts[rid]
        info["sent"] = all_sent
        info["scheduled"] = dict(num_sched)
        self.steps.append(info)
        return info

    def _remote_kvs_done(self, req):
        """vLLM's _update_waiting_for_remote_kv for a request every worker has reported."""
        rid = req.request_id
        if rid in self._failed_recving:
            self._failed_recving.discard(rid)
            if req.num_computed_tokens == 0:  # nothing usable: looked up again from scratch
                self._free(self.blocks.pop(rid, []))
        else:
            n = min(len(self.blocks[rid]) * self.block_size, req.num_tokens)
            req.num_computed_tokens = n - 1 if n == req.num_tokens else n

    def _finish(self, req, delay=False):
        rid = req.request_id
        blocks = self.blocks.pop(rid, [])
        self.finished_blocks[rid] = list(blocks)
        n = min(req.num_computed_tokens, req.num_prompt_tokens)
        if blocks and n:  # (a parked request has computed nothing)
            self.snapshots[rid] = [w.cache.read(blocks, 0, n) for w in self.workers]
        if hasattr(self.scheduler, "request_finished_all_groups"):
            # vLLM's Scheduler with a SupportsHMA connector: block ids per KV cache group.
            conn_delay, params = self.scheduler.request_finished_all_groups(req, (list(blocks),))
        else:
            conn_delay, params = self.scheduler.request_finished(req, blocks)
        assert params is None
        self.connector_delays[rid] = conn_delay
        if delay or conn_delay:
            self.held[rid] = blocks
        else:
            self._free(blocks)
        self._finished_since.add(rid)
        self.finished.append(rid)

    def run(self, max_steps=100, timeout_s=30.0):
        """Steps until nothing is left. Steps that schedule nothing (requests waiting for their
        loads) do not count against max_steps, only against timeout_s."""
        deadline = time.monotonic() + timeout_s
        while max_steps > 0 and time.monotonic() < deadline:
            if not (self.waiting or self.running or self.held or self._finished_since):
                return
            info = self.step()
            if info["scheduled"]:
                max_steps -= 1
            else:
                time.sleep(0.002)  # the loader threads are working
        raise AssertionError("the test engine did not finish in time")

    def run_until_loaded(self, rids, timeout_s=30.0):
        """Steps (scheduling whatever else is runnable) until every request in `rids` has been
        reported received by all workers; returns the steps taken."""
        rids, taken = set(rids), []
        deadline = time.monotonic() + timeout_s
        while rids:
            assert time.monotonic() < deadline, f"{sorted(rids)} were never reported loaded"
            info = self.step()
            taken.append(info)
            rids -= info["recving"]
            if rids and not info["scheduled"]:
                time.sleep(0.002)
        return taken

    def block_ids(self, rid):
        """The request's blocks (also just after it finished, until they are reused)."""
        return list(self.blocks[rid] if rid in self.blocks else self.finished_blocks[rid])

    def read_prompt(self, rid, rank, a, b):
        return self.workers[rank].cache.read(self.block_ids(rid), a, b)

    def idle_blocks(self):
        return len(self.free) == self.num_blocks

    def shutdown(self):
        for w in self.workers:
            w.connector.shutdown()
        self.scheduler.shutdown()
