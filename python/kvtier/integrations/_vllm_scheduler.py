"""The scheduler half of the kvtier vLLM connector: prefix lookups and the per-step transfer plan.

Per request it keeps: what the lookup found (``_Lookup``), the load vLLM accepted
(``_PendingLoad``, from ``update_state_after_alloc``) and, while it runs, a ``_Tracker`` of its
prompt, chunk hashes, block ids and how many chunks are saved.

Saves run late. The chunks a request computed in step N are sent to the workers with the
metadata of step N + d, where d is the number of steps vLLM keeps in flight (1; 2 with async
scheduling, which schedules step N+1 before it has seen step N's output), and the workers store
them in ``handle_preemptions``, the first call of that step, before its forward. By then the
scheduler has seen step N's failed loads (``update_connector_output``) and drops every save of a
request that touched a failed block: its forward attended to garbage, so its new chunks must never
reach the cache. Until a save has run its blocks must still hold the request's KV:
- a request that finishes with a save still pending keeps its blocks (``request_finished``
  returns True) until every worker reports the save in ``finished_sending``;
- a request that vLLM preempts loses its blocks at once (they may be given to another request,
  zeroed or written in the very step that would have saved them), so its pending saves are
  dropped (``SchedulerOutput.preempted_req_ids``) and those chunks are saved again after it
  resumes and recomputes them.

With ``kvtier.async_load`` a hit answers ``(n, True)``: vLLM allocates blocks for the hit only,
parks the request (WAITING_FOR_REMOTE_KVS) and does not schedule it. Its retrieve plan goes out with
that step's metadata and runs in the workers' loader threads; once every worker reported it in
``finished_recving`` vLLM schedules the request without asking again, and the scheduler frees
the lookup's locks. A parked request that finishes keeps its blocks until that report (vLLM
frees them then), since a load is still writing them. It computes nothing while parked, so it
has no saves and its blocks are never read by a save of the same steps.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import math
import time
from dataclasses import dataclass

import numpy as np

from kvtier._kvtier import KvtierError, chunk_hashes

from ._vllm_base import KvtierConnectorMetadata, RetrievePlan, StorePlan
from ._vllm_config import Settings, check_chunk_size
from ._vllm_events import SchedulerEvents, chunk_events
from ._vllm_link import ServerLink
from ._vllm_pd import announced_chunks, prefill_params

log = logging.getLogger("kvtier.integrations.vllm")


@dataclass
class _ReqInfo:
    """What the connector derives from a Request once."""

    tokens: np.ndarray  # prompt token ids, uint32
    salt: str
    eligible: bool
    hashes: list[bytes] | None = None  # chain hashes of the prompt's full chunks
    hashes_for: tuple | None = None  # (chunk_size, algo) they were made with
    cached_chunks: int = 0  # leading chunks the last lookup found in kvtier
    has_session: bool = False  # a LOOKUP created a server-side session
    request: object = None  # vLLM's Request, kept for its KV events (settings.kv_events)
    waiting_since: float | None = None  # P/D: held back for its prefill's chunks (_vllm_pd)


@dataclass
class _Lookup:
    chunks: int  # chunks asked for
    hit_chunks: int  # leading chunks every rank has
    at: float  # time.monotonic() of the LOOKUP
    local: int = 0  # vLLM's own prefix hit, in tokens, at the last call


@dataclass
class _PendingLoad:
    block_ids: list[int]
    start: int
    end: int


@dataclass
class _Tracker:
    info: _ReqInfo
    block_ids: list[int]
    saved_chunks: int  # chunks [0, saved_chunks) are stored, planned, or were in kvtier


@dataclass
class _Deferred:
    job: StorePlan
    all_blocks: frozenset  # every block of the request at planning time
    step: int  # the build_connector_meta call that planned it


@dataclass
class SchedulerStats:
    lookups: int = 0
    lookup_errors: int = 0
    lookup_hit_chunks: int = 0
    matched_tokens: int = 0
    retrieve_plans: int = 0
    store_plans: int = 0
    saves_dropped_after_load_error: int = 0
    saves_dropped_after_preemption: int = 0
    delayed_frees: int = 0


def _group0(block_ids):
    """Block ids of the first (only) KV cache group: vLLM passes tuple[list[int], ...], older
    versions a flat list."""
    if block_ids is None:
        return []
    if len(block_ids) and isinstance(block_ids[0], (list, tuple)):
        return list(block_ids[0])
    return list(block_ids)


def _mm_identifiers(request) -> list[str] | None:
    """Identifiers of the request's multimodal inputs with their positions; [] without any,
    None if it has some whose identity cannot be read (such a request is not cached)."""
    out = []
    features = getattr(request, "mm_features", None)
    if features:
        for f in features:
            ident = getattr(f, "identifier", None) or getattr(f, "mm_hash", None)
            if not ident:
                return None
            out.append(f"{ident}@{getattr(getattr(f, 'mm_position', None), 'offset', '')}")
        return out
    hashes = getattr(request, "mm_hashes", None)
    positions = getattr(request, "mm_positions", None) or []
    if hashes:
        return [f"{h}@{getattr(p, 'offset', '')}" for h, p in zip(hashes, positions or hashes)]
    if positions:
        return None
    return out


def request_salt(request) -> tuple[str, bool]:
    """(salt, eligible). Everything besides the tokens that changes a request's KV goes into the
    salt, so that requests share cache entries only when their KV is the same: vLLM's cache_salt,
    the LoRA adapter, and the identity of multimodal inputs (their placeholder tokens are
    the same for every image)."""
    parts = []
    cache_salt = getattr(request, "cache_salt", None)
    if cache_salt:
        parts.append(f"salt={cache_salt}")
    lora = getattr(request, "lora_request", None)
    if lora is not None:
        name = getattr(lora, "lora_name", None) or getattr(lora, "name", None)
        parts.append(f"lora={name}#{getattr(lora, 'lora_int_id', '')}")
    mm = _mm_identifiers(request)
    if mm is None:
        return "", False
    if mm:
        parts.append("mm=" + ",".join(mm))
    if not parts:
        return "", True
    # The server takes at most 128 characters without '@', '/', '\\': a digest always fits.
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32], True


class SchedulerSide:
    def __init__(self, settings: Settings):
        self._s = settings
        self._chunk: int | None = None
        self._algo: str | None = None
        self._link = ServerLink(settings, "scheduler", on_connect=self._on_connect)
        self._infos: dict[str, _ReqInfo] = {}
        self._lookups: dict[str, _Lookup] = {}
        self._pending_loads: dict[str, _PendingLoad] = {}
        self._trackers: dict[str, _Tracker] = {}
        self._deferred: list[_Deferred] = []  # planned, not sent yet (module docstring)
        self._step = 0  # build_connector_meta calls so far
        self._held: set[str] = set()  # finished requests whose blocks wait for a save
        self._unlock_next: list[str] = []  # loads sent last step: release their lookup locks
        self._parked: set[str] = set()  # async loads sent, not yet in finished_recving
        self.stats = SchedulerStats()
        self.events = SchedulerEvents() if settings.kv_events else None
        if settings.load_failure_policy == "fail" and settings.load_enabled:
            log.warning("kvtier connector: vLLM's kv_load_failure_policy is 'fail': a chunk the "
                        "kvtier server cannot deliver after a hit (evicted, a restarted server, "
                        "an expired lock) ends that request with an error. Add "
                        "\"kv_load_failure_policy\":\"recompute\" to --kv-transfer-config to "
                        "have vLLM recompute those tokens instead (docs/integrations.md)")
        # Connect now so that a wrong chunk size stops the engine at start-up with a clear error;
        # a server that is not up yet is only a warning (the link retries).
        self._link.get()

    # ---------------------------------------------------------------- server

    def _on_connect(self, client, info):
        check_chunk_size(int(info["chunk_size"]), self._s.block_size)
        chunk, algo = int(info["chunk_size"]), str(info["hash"])
        if (chunk, algo) != (self._chunk, self._algo) and self._chunk is not None:
            log.warning("kvtier connector: the server's chunking changed (%s/%s -> %s/%s); "
                        "running requests save from scratch", self._chunk, self._algo, chunk,
                        algo)
            for tr in self._trackers.values():
                tr.saved_chunks = 0
        self._chunk, self._algo = chunk, algo

    def _session_call(self, fn_name: str, req_id: str) -> None:
        client = self._link.client()
        if client is None:
            return
        try:
            getattr(client, fn_name)(req_id)
        except KvtierError as e:
            if getattr(e, "code_name", "") != "NOT_FOUND":
                self._link.failed(e)

    # ---------------------------------------------------------------- requests

    def _info(self, request) -> _ReqInfo:
        rid = request.request_id
        info = self._infos.get(rid)
        if info is None:
            prompt = getattr(request, "prompt_token_ids", None)
            salt, eligible = request_salt(request)
            if prompt is None or len(prompt) == 0:
                tokens, eligible = np.zeros(0, dtype=np.uint32), False
            else:
                tokens = np.asarray(prompt, dtype=np.uint32)
            info = _ReqInfo(tokens=tokens, salt=salt, eligible=eligible,
                            request=request if self._s.kv_events else None)
            self._infos[rid] = info
        return info

    def _hashes(self, info: _ReqInfo) -> list[bytes]:
        key = (self._chunk, self._algo)
        if info.hashes is None or info.hashes_for != key:
            info.hashes = chunk_hashes(info.tokens, self._chunk, self._algo)
            info.hashes_for = key
        return info.hashes

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int):
        info = self._info(request)  # a producer saves what it computes: it needs the info too
        if not self._s.load_enabled:
            return 0, False
        if not info.eligible:
            return 0, False
        bs = self._s.block_size
        # The last token is always recomputed (vLLM needs its logits), and loads stay
        # block-aligned.
        cap = (int(request.num_tokens) - 1) // bs * bs
        if cap <= num_computed_tokens:
            return 0, False
        client = self._link.client()
        if client is None:
            return 0, False
        chunk = self._chunk
        want = min(-(-cap // chunk), len(info.tokens) // chunk)
        if want == 0:
            return 0, False
        rid = request.request_id
        lk = self._lookups.get(rid)
        announced = min(announced_chunks(request, self._s.model, chunk), want)
        # vLLM asks again, every step, for a request it could not allocate: a hit is claimed
        # only while the LOOKUP's read locks (the server's --pin-ttl-s) surely still hold it, so
        # an old one is redone (it replaces the old locks); a claimed chunk that is gone by the
        # load would be a failure, which vLLM's default policy turns into a failed request.
        # A decode request that waits for its prefill's chunks looks again every few ms.
        age = time.monotonic() - lk.at if lk is not None else 0.0
        if (lk is None or lk.chunks != want or age > self._s.lookup_max_age_s
                or (lk.hit_chunks < announced and age >= 0.002)):
            hashes = self._hashes(info)[:want]
            try:
                info.has_session = True
                hit = client.lookup_and_wait(self._s.model, self._s.key_world_size,
                                             hashes=hashes, request_id=rid, salt=info.salt,
                                             wait_us=self._s.lookup_timeout_ms * 1000)
            except KvtierError as e:
                self.stats.lookup_errors += 1
                self._link.failed(e)
                log.debug("kvtier connector: lookup of %s failed: %s", rid, e)
                return 0, False
            self.stats.lookups += 1
            if hit is None:
                # Treated as a miss, and remembered as one so that vLLM asking again does not
                # wait again; the job's late locks go with the session at the end.
                log.debug("kvtier connector: lookup of %s took longer than %d ms; treated as a "
                          "miss", rid, self._s.lookup_timeout_ms)
                hit = 0
            lk = _Lookup(chunks=want, hit_chunks=min(hit, want), at=time.monotonic())
            self._lookups[rid] = lk
            self.stats.lookup_hit_chunks += lk.hit_chunks
        if lk.hit_chunks < announced and self._wait_for_prefill(info, rid, lk, announced):
            return None, False  # vLLM asks again next step
        lk.local = num_computed_tokens
        end = min(lk.hit_chunks * chunk, cap)
        if self._s.async_load and self._s.transfer != "host":
            # A parked request has no block past its claim, and the GPU path writes whole chunks:
            # a claim ending inside a chunk could not be loaded whole, and with vLLM's
            # kv_load_failure_policy "fail" its tail would end the request.
            end = end // chunk * chunk
        n = max(end - num_computed_tokens, 0)
        return n, n > 0 and self._s.async_load  # vLLM: never (0, True)

    def _wait_for_prefill(self, info: _ReqInfo, rid: str, lk: _Lookup, announced: int) -> bool:
        """P/D: the prefill engine's saves of a decode request's chunks may not have run yet. It
        waits kvtier.timeout_ms, the time the prefill's STORE may take before it fails."""
        now = time.monotonic()
        if info.waiting_since is None:
            info.waiting_since = now
        if now - info.waiting_since < self._s.timeout_ms / 1000:
            return True
        if info.waiting_since != -math.inf:
            info.waiting_since = -math.inf  # gave up: computes the rest, logged once
            log.warning("kvtier connector: %s: %d of the %d chunks its prefill engine saved are "
                        "in kvtier after %d ms (kvtier.timeout_ms); computing the rest", rid,
                        lk.hit_chunks, announced, self._s.timeout_ms)
        return False

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int) -> None:
        rid = request.request_id
        info = self._info(request)
        lk = self._lookups.pop(rid, None)
        if lk is not None:
            info.cached_chunks = lk.hit_chunks
        if num_external_tokens > 0 and lk is not None:
            start, end = lk.local, lk.local + int(num_external_tokens)
            if end > lk.hit_chunks * self._chunk:
                log.error("kvtier connector: vLLM accepted %d external tokens for %s, more than "
                          "the %d found; not loading", num_external_tokens, rid,
                          lk.hit_chunks * self._chunk - lk.local)
                return
            self._pending_loads[rid] = _PendingLoad(_group0(blocks.get_block_ids()), start, end)
            self.stats.matched_tokens += end - start
        elif lk is not None and lk.hit_chunks > 0:
            # Nothing to load (vLLM's own cache had it): let the server evict those chunks.
            self._session_call("free_lookup_locks", rid)

    def build_connector_meta(self, scheduler_output) -> KvtierConnectorMetadata:
        meta = KvtierConnectorMetadata()
        for rid in self._unlock_next:
            self._session_call("free_lookup_locks", rid)
        self._unlock_next = []
        self._drop_preempted(getattr(scheduler_output, "preempted_req_ids", None))
        # The saves of steps whose output (their failed loads) vLLM has processed by now.
        due = self._step - self._s.save_delay
        meta.saves = [d.job for d in self._deferred if d.step <= due]
        self._deferred = [d for d in self._deferred if d.step > due]
        pending = {d.job.req_id for d in self._deferred}
        meta.release = sorted(self._held - pending)
        self._held &= pending

        nst = getattr(scheduler_output, "num_scheduled_tokens", None) or {}
        for new in getattr(scheduler_output, "scheduled_new_reqs", None) or ():
            rid = new.req_id
            info = self._infos.get(rid)
            if info is None:  # never seen by get_num_new_matched_tokens: not ours to cache
                info = _ReqInfo(tokens=np.zeros(0, dtype=np.uint32), salt="", eligible=False)
                self._infos[rid] = info
            tr = self._trackers.get(rid)  # made when an async load parked it
            if tr is None:
                tr = _Tracker(info, _group0(new.block_ids), saved_chunks=info.cached_chunks)
                self._trackers[rid] = tr
            else:
                tr.block_ids = _group0(new.block_ids)
            self._plan_load(meta, rid)
            self._plan_save(rid, tr, int(new.num_computed_tokens) + int(nst.get(rid, 0)))
        for rid, new_blocks, resumed, computed in _cached_requests(
                getattr(scheduler_output, "scheduled_cached_reqs", None)):
            tr = self._trackers.get(rid)
            if tr is None:
                continue
            if resumed:
                tr.block_ids = _group0(new_blocks)
            elif new_blocks:
                tr.block_ids.extend(_group0(new_blocks))
            self._plan_load(meta, rid)
            self._plan_save(rid, tr, int(computed) + int(nst.get(rid, 0)))
        for rid in list(self._pending_loads):
            if self._s.async_load:  # parked by vLLM: its load starts now
                self._plan_parked_load(meta, rid)
            else:  # accepted but not scheduled: vLLM will ask again
                del self._pending_loads[rid]
                self._session_call("free_lookup_locks", rid)
        for rid in getattr(scheduler_output, "finished_req_ids", None) or ():
            self._forget(rid)
        self._step += 1
        return meta

    def _drop_preempted(self, preempted) -> None:
        """A preempted request's blocks went back to vLLM in this very schedule(): a save of them
        could read another request's KV, so its pending saves go, and its chunks are saved again
        once it has resumed and recomputed them."""
        if not preempted or not self._deferred:
            return
        keep = []
        for d in self._deferred:
            if d.job.req_id not in preempted:
                keep.append(d)
                continue
            tr = self._trackers.get(d.job.req_id)
            if tr is not None:
                tr.saved_chunks = min(tr.saved_chunks, d.job.first_chunk)
            self.stats.saves_dropped_after_preemption += 1
        self._deferred = keep

    def _plan_parked_load(self, meta: KvtierConnectorMetadata, rid: str) -> None:
        pl = self._pending_loads[rid]
        tr = self._trackers.get(rid)  # a preempted request keeps its tracker (saved chunks)
        if tr is None:
            info = self._infos[rid]
            tr = self._trackers[rid] = _Tracker(info, [], saved_chunks=info.cached_chunks)
        tr.block_ids = list(pl.block_ids)  # update_connector_output finds failed blocks here
        if not self._plan_load(meta, rid):
            # vLLM waits for this request in finished_recving: send a job that loads nothing,
            # so that the workers report it with all its blocks failed.
            meta.loads.append(RetrievePlan(
                req_id=rid, hashes=[], salt="", first_chunk=0, end_chunk=0,
                start_token=pl.start, end_token=pl.end,
                block_ids=pl.block_ids[pl.start // self._s.block_size:]))
        self._parked.add(rid)

    def _plan_load(self, meta: KvtierConnectorMetadata, rid: str) -> bool:
        pl = self._pending_loads.pop(rid, None)
        if pl is None:
            return False
        tr = self._trackers[rid]
        bs, chunk = self._s.block_size, self._chunk
        blocks = pl.block_ids[pl.start // bs:pl.end // bs]
        if len(blocks) != (pl.end - pl.start) // bs:
            log.error("kvtier connector: %s has %d blocks, too few to load tokens [%d, %d)", rid,
                      len(pl.block_ids), pl.start, pl.end)
            return False
        end_chunk = -(-pl.end // chunk)
        meta.loads.append(RetrievePlan(
            req_id=rid, hashes=self._hashes(tr.info)[:end_chunk], salt=tr.info.salt,
            first_chunk=pl.start // chunk, end_chunk=end_chunk, start_token=pl.start,
            end_token=pl.end, block_ids=blocks,
            tail_block_ids=pl.block_ids[pl.end // bs:end_chunk * chunk // bs]))
        self.stats.retrieve_plans += 1
        if not self._s.async_load:  # async: the locks go once the load is reported done
            self._unlock_next.append(rid)
        return True

    def _plan_save(self, rid: str, tr: _Tracker, computed_end: int) -> None:
        if not self._s.save_enabled or not tr.info.eligible or self._chunk is None:
            return
        chunk = self._chunk
        end_chunk = min(computed_end, len(tr.info.tokens)) // chunk
        if end_chunk <= tr.saved_chunks:
            return
        bpc = chunk // self._s.block_size
        if len(tr.block_ids) < end_chunk * bpc:
            return
        job = StorePlan(req_id=rid, hashes=self._hashes(tr.info)[:end_chunk], salt=tr.info.salt,
                      first_chunk=tr.saved_chunks, end_chunk=end_chunk,
                      block_ids=tr.block_ids[tr.saved_chunks * bpc:end_chunk * bpc])
        if self.events is not None:
            job.events = chunk_events(tr.info.request, tr.saved_chunks, end_chunk, chunk,
                                      self._s.block_size)
        self._deferred.append(_Deferred(job, frozenset(tr.block_ids), self._step))
        tr.saved_chunks = end_chunk
        self.stats.store_plans += 1

    def update_connector_output(self, connector_output) -> None:
        # vLLM passes what every worker reported (its KVOutputAggregator): a request is in
        # finished_recving once its load ran on every rank.
        if self.events is not None:
            self.events.collect(connector_output)
        for rid in getattr(connector_output, "finished_recving", None) or ():
            if rid in self._parked:
                self._parked.discard(rid)
                self._session_call("free_lookup_locks", rid)
        invalid = getattr(connector_output, "invalid_block_ids", None)
        if not invalid:
            return
        invalid = set(invalid)
        bpc = self._chunk // self._s.block_size if self._chunk else 1
        keep = []
        for d in self._deferred:
            if d.all_blocks.isdisjoint(invalid):
                keep.append(d)
            else:
                self.stats.saves_dropped_after_load_error += 1
        self._deferred = keep
        # vLLM recomputes from the first failed block: those chunks must be saved again.
        for tr in self._trackers.values():
            for i, b in enumerate(tr.block_ids[:tr.saved_chunks * bpc]):
                if b in invalid:
                    tr.saved_chunks = min(tr.saved_chunks, i // bpc)
                    break

    def request_finished(self, request, block_ids) -> tuple[bool, dict | None]:
        rid = request.request_id
        info = self._infos.get(rid)
        if info is not None and info.has_session:
            self._session_call("end_session", rid)
        tr = self._trackers.get(rid)
        params = None  # P/D: a prefill leg's response names the chunks the server will have
        if tr is not None and self._s.save_enabled and tr.info.eligible:
            params = prefill_params(request, tr.saved_chunks, self._s.model, self._chunk)
        self._forget(rid)
        if rid in self._parked:
            # A worker may still be writing its blocks: vLLM frees them when every worker has
            # reported the request in finished_recving (recent vLLM also holds them by itself).
            self._parked.discard(rid)
            return True, None
        if any(d.job.req_id == rid for d in self._deferred):
            self._held.add(rid)  # released with its last save (build_connector_meta)
            self.stats.delayed_frees += 1
            return True, params
        return False, params

    def reset_cache(self) -> bool:
        """Drops this model's chunks from the server (L1 and L2; chunks a lookup holds locked
        stay until released) and forgets what earlier lookups found."""
        self._lookups.clear()
        client = self._link.client()
        if client is None:
            return False
        try:
            client.evict(f"{self._s.model}@", tiers="all")
        except KvtierError as e:
            self._link.failed(e)
            log.warning("kvtier connector: reset_cache: the server did not drop %s's chunks: %s",
                        self._s.model, e)
            return False
        for tr in self._trackers.values():  # running requests store their chunks again
            tr.saved_chunks = 0
        if self.events is not None:
            self.events.cleared()
        return True

    def take_events(self) -> list:
        return self.events.take() if self.events is not None else []

    def _forget(self, rid: str) -> None:
        self._infos.pop(rid, None)
        self._lookups.pop(rid, None)
        self._trackers.pop(rid, None)
        if self._pending_loads.pop(rid, None) is not None:
            self._session_call("free_lookup_locks", rid)

    def shutdown(self) -> None:
        log.info("kvtier connector (scheduler): %s", dataclasses.asdict(self.stats))
        self._link.close()


def _cached_requests(cached):
    """(req_id, new_block_ids, resumed, num_computed_tokens) for scheduled_cached_reqs in the
    layouts vLLM has used: one CachedRequestData of lists (with resumed_req_ids, or
    resumed_from_preemption as a list), or a list of per-request objects (v0.9)."""
    if cached is None:
        return
    if isinstance(cached, (list, tuple)):
        for c in cached:
            yield (c.req_id, c.new_block_ids, bool(getattr(c, "resumed_from_preemption", False)),
                   c.num_computed_tokens)
        return
    req_ids = list(getattr(cached, "req_ids", ()) or ())
    resumed_ids = getattr(cached, "resumed_req_ids", None)
    resumed_flags = getattr(cached, "resumed_from_preemption", None)
    new_blocks = getattr(cached, "new_block_ids", None) or [None] * len(req_ids)
    computed = getattr(cached, "num_computed_tokens", None) or [0] * len(req_ids)
    for i, rid in enumerate(req_ids):
        if resumed_ids is not None:
            resumed = rid in resumed_ids
        elif resumed_flags is not None:
            resumed = bool(resumed_flags[i])
        else:
            resumed = False
        yield rid, new_blocks[i], resumed, computed[i]

