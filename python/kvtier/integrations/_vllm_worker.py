"""The worker half of the kvtier vLLM connector: one per vLLM worker (GPU / TP rank) process.

The engine's KV tensors are not memory the server can map, so each worker registers a bounded
staging buffer (a memfd ``HostKvBuffer``) instead, laid out as the server's paged layout: one
region per layer and K/V (one per layer with MLA), ``staging_blocks`` blocks each. A transfer
moves up to ``staging_blocks`` blocks' worth of whole chunks at a time: a torch gather copies the
engine's blocks into staging slots and STORE names those slots, or RETRIEVE fills the slots and a
scatter (numpy fancy assignment on byte views) copies them into the engine's blocks; no Python
loop runs over tokens or blocks. Bytes are kept in logical token order ([tokens, heads, dim] per
block and K/V), so engines with the NHD or the HND physical layout, FlashAttention, FlashInfer or
vLLM's CPU backend ([2, blocks, heads, tokens, dim]) read each other's chunks.

Everything happens in ``start_load_kv``, before the forward: first the saves the scheduler
planned for the previous step's tokens, then this step's loads (so that a block that vLLM freed
and handed to a loading request is read before it is overwritten). ``wait_for_layer_load`` and
``save_kv_layer`` do nothing: whole requests move per step, so no per-layer Python hook has to
run inside the model, which keeps the connector correct under full CUDA-graph replay.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import dataclasses
from dataclasses import dataclass

import numpy as np
import torch

from kvtier._kvtier import HostKvBuffer, KvtierError, paged_layout

from ._vllm_base import VLLM_AVAILABLE, KvtierConnectorMetadata, LoadJob, SaveJob
from ._vllm_config import Settings, check_chunk_size
from ._vllm_link import ServerLink

log = logging.getLogger("kvtier.integrations.vllm")
_instance_counter = itertools.count()


@dataclass
class Geometry:
    """What register_kv_caches found out about the engine's KV tensors."""

    kind: str  # flash_attn, flashinfer, cpu or mla
    layer_names: list
    num_blocks: int  # vLLM (scheduler) blocks
    kernel_block: int  # tokens per block of the tensors (may divide the scheduler's block)
    ratio: int  # kernel blocks per scheduler block
    dtype: torch.dtype
    token_shape: tuple  # (heads, head_dim), or (latent_dim,) with MLA
    bytes_per_token: int  # of one region (K or V, or the latent)

    @property
    def regions_per_layer(self) -> int:
        return 1 if self.kind == "mla" else 2


def _check_tensor(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"kvtier connector: KV cache of layer {name!r} is a {type(t).__name__}, "
                        f"not a torch.Tensor")
    if t.device.type != "cpu":
        raise RuntimeError(
            f"kvtier connector: the KV cache of layer {name!r} is on {t.device}; only host (CPU) "
            f"KV caches are supported for now (e.g. vLLM's CPU backend). The CUDA data path "
            f"(CUDA IPC) is not built yet.")


SHAPES = {
    "flash_attn": "[2, num_blocks, block_size, heads, head_dim]",
    "flashinfer": "[num_blocks, 2, block_size, heads, head_dim]",
    "cpu": "[2, num_blocks, heads, block_size, head_dim]",
    "mla": "[num_blocks, block_size, dim]",
}


def _divides(kb: int, bs: int) -> bool:
    return 0 < kb <= bs and bs % kb == 0


def _guess_kind(shape: tuple, settings: Settings, heads: int | None,
                cpu_platform: bool | None) -> str:
    """The layout of a KV tensor of `shape`. FlashAttention's [2, blocks, tokens, heads, dim]
    and vLLM's CPU backend's [2, blocks, heads, tokens, dim] differ only in the order of two
    dimensions: the number of KV heads (from vLLM's KV cache spec or model config) or the
    platform tells them apart; if nothing does, the user has to say (kvtier.kv_layout)."""
    bs = settings.block_size
    if settings.use_mla:
        return "mla"
    if len(shape) == 3:
        return "mla"
    if len(shape) != 5:
        raise ValueError(f"kvtier connector: unknown KV cache shape {shape}; expected one of "
                         f"{', '.join(SHAPES.values())}")
    if shape[0] == 2 and shape[1] == 2:
        raise ValueError(f"kvtier connector: KV cache shape {shape} fits both [2, num_blocks, "
                         f"...] and [num_blocks, 2, ...]; set kvtier.kv_layout")
    if shape[1] == 2:
        return "flashinfer"
    if shape[0] != 2:
        raise ValueError(f"kvtier connector: unknown KV cache shape {shape}; expected one of "
                         f"{', '.join(SHAPES.values())}")
    fa = _divides(shape[2], bs) and (heads is None or shape[3] == heads)
    cpu = _divides(shape[3], bs) and (heads is None or shape[2] == heads)
    if fa and cpu and cpu_platform is not None:
        return "cpu" if cpu_platform else "flash_attn"
    if fa != cpu:
        return "flash_attn" if fa else "cpu"
    if not fa:
        with_heads = f" and {heads} KV heads" if heads is not None else ""
        raise ValueError(f"kvtier connector: the KV cache shape {shape} is neither "
                         f"FlashAttention's {SHAPES['flash_attn']} nor the CPU backend's "
                         f"{SHAPES['cpu']} for block size {bs}{with_heads}")
    raise ValueError(f"kvtier connector: cannot tell whether the KV cache shape {shape} is "
                     f"FlashAttention's {SHAPES['flash_attn']} or the CPU backend's "
                     f"{SHAPES['cpu']}; set kvtier.kv_layout")


def detect_geometry(kv_caches: dict, settings: Settings, heads: int | None = None,
                    cpu_platform: bool | None = None) -> Geometry:
    if not kv_caches:
        raise ValueError("kvtier connector: register_kv_caches got no layers")
    names = list(kv_caches)
    first = kv_caches[names[0]]
    for name in names:
        t = kv_caches[name]
        _check_tensor(name, t)
        if tuple(t.shape) != tuple(first.shape) or t.dtype != first.dtype:
            raise ValueError(
                f"kvtier connector: every layer's KV cache must have the same shape and dtype "
                f"(one KV cache group); {names[0]!r} is {tuple(first.shape)} {first.dtype}, "
                f"{name!r} is {tuple(t.shape)} {t.dtype}")
    shape = tuple(first.shape)
    kind = settings.kv_layout
    if kind == "auto":
        kind = _guess_kind(shape, settings, heads, cpu_platform)
    ok = (len(shape) == 3 if kind == "mla" else
          len(shape) == 5 and (shape[1] == 2 if kind == "flashinfer" else shape[0] == 2))
    if not ok:
        raise ValueError(f"kvtier connector: a {kind} KV cache is {SHAPES[kind]}, got {shape}")
    if kind == "mla":
        nbk, kb, token_shape = shape[0], shape[1], shape[2:]
    elif kind == "flash_attn":
        nbk, kb, token_shape = shape[1], shape[2], shape[3:]
    elif kind == "flashinfer":
        nbk, kb, token_shape = shape[0], shape[2], shape[3:]
    else:  # cpu: [2, blocks, heads, tokens, dim]
        nbk, kb, token_shape = shape[1], shape[3], (shape[2], shape[4])
    if settings.use_mla != (kind == "mla"):
        raise ValueError(f"kvtier connector: model_config.use_mla is {settings.use_mla} but the "
                         f"KV cache looks like {kind} ({shape})")
    bs = settings.block_size
    if not _divides(kb, bs):
        raise ValueError(f"kvtier connector: the KV cache's block dimension is {kb} tokens but "
                         f"cache_config.block_size is {bs}")
    ratio = bs // kb  # > 1 when the kernel's blocks are smaller than the scheduler's
    if nbk % ratio:
        raise ValueError(f"kvtier connector: {nbk} kernel blocks of {kb} tokens do not make whole "
                         f"blocks of {bs}")
    elem = torch.empty((), dtype=first.dtype).element_size()
    return Geometry(kind=kind, layer_names=names, num_blocks=nbk // ratio, kernel_block=kb,
                    ratio=ratio, dtype=first.dtype, token_shape=tuple(token_shape),
                    bytes_per_token=int(np.prod(token_shape)) * elem)


def kv_heads_hint(vllm_config, kv_cache_config) -> int | None:
    """KV heads per rank, from vLLM's KV cache spec or model config, if either says."""
    try:
        return int(kv_cache_config.kv_cache_groups[0].kv_cache_spec.num_kv_heads)
    except Exception:  # noqa: BLE001  (older vLLM, or no kv_cache_config)
        pass
    try:
        return int(vllm_config.model_config.get_num_kv_heads(vllm_config.parallel_config))
    except Exception:  # noqa: BLE001
        return None


def on_cpu_platform() -> bool | None:
    if not VLLM_AVAILABLE:
        return None
    try:
        from vllm.platforms import current_platform  # type: ignore

        return bool(current_platform.is_cpu())
    except Exception:  # noqa: BLE001
        return None


def worker_ranks(vllm_config, settings: Settings) -> tuple[int, int]:
    """(tp_rank, pp_rank) of this worker: vLLM's process groups when they are up, else
    parallel_config.rank (the worker's rank in its engine, pp_rank * tp + tp_rank)."""
    if VLLM_AVAILABLE:
        try:
            from vllm.distributed.parallel_state import (  # type: ignore
                get_pp_group, get_tensor_model_parallel_rank)

            return int(get_tensor_model_parallel_rank()), int(get_pp_group().rank_in_group)
        except Exception:  # noqa: BLE001  (groups not initialised: fall back to the config)
            pass
    rank = int(getattr(getattr(vllm_config, "parallel_config", None), "rank", 0) or 0)
    rank %= settings.tp_size * settings.pp_size
    return rank % settings.tp_size, rank // settings.tp_size


class _Pair:
    """One region (a layer's K, V or latent): the engine's view [blocks, tokens, ...] in logical
    order and its staging slots. Gathers use torch.index_select; scatters use numpy fancy
    assignment on byte views of the same memory, which copies a block's bytes at memcpy speed
    where torch 1.13's index_copy_ / index_put_ go element by element (loads of
    bench/vllm_connector.py: 2.3-3.6 GB/s with index_copy_, 5-10 GB/s this way)."""

    def __init__(self, engine: torch.Tensor, staging: torch.Tensor):
        self.engine, self.staging = engine, staging
        self.engine_np = self.staging_np = None
        try:
            e8, s8 = engine.view(torch.uint8), staging.view(torch.uint8)
        except RuntimeError:  # no byte view (last dim not dense): torch's index_copy_
            return
        try:  # one row of bytes per block where a block is contiguous (NHD)
            e8, s8 = e8.view(e8.shape[0], -1), s8.view(s8.shape[0], -1)
        except RuntimeError:  # HND / CPU backend: [blocks, tokens, heads, dim bytes]
            pass
        self.engine_np, self.staging_np = e8.numpy(), s8.numpy()


@dataclass
class WorkerStats:
    load_jobs: int = 0
    loaded_chunks: int = 0
    loaded_tokens: int = 0
    load_failed_blocks: int = 0
    save_jobs: int = 0
    stored_chunks: int = 0
    present_chunks: int = 0
    skipped_chunks: int = 0
    store_errors: int = 0


class WorkerSide:
    def __init__(self, settings: Settings, vllm_config, kv_cache_config=None):
        self._s = settings
        self._heads = kv_heads_hint(vllm_config, kv_cache_config)
        self.tp_rank, self.pp_rank = worker_ranks(vllm_config, settings)
        self.key_rank = settings.key_rank(self.tp_rank, self.pp_rank)
        # With MLA every TP rank holds the same bytes: rank 0 stores them, every rank loads.
        self.stores = settings.save_enabled and not (settings.use_mla and self.tp_rank != 0)
        seed = f"{settings.engine_id}/{os.getpid()}/{next(_instance_counter)}"
        digest = int.from_bytes(hashlib.blake2b(seed.encode(), digest_size=6).digest(), "little")
        self.instance_id = (digest << 8) | (self.tp_rank + self.pp_rank * settings.tp_size) % 256
        self.geometry: Geometry | None = None
        self._tensors: list = []
        self._chunk: int | None = None
        self._buffer = None
        self._pairs: list = []  # a _Pair per layer and region
        self._staging_blocks = 0
        self._link = ServerLink(settings, f"worker tp{self.tp_rank} pp{self.pp_rank}",
                                on_connect=self._on_connect)
        self._registered = False
        self._disabled = False
        self._invalid: set[int] = set()
        self._to_release: set[str] = set()
        self._recent_finished: list[set] = [set(), set()]
        self._done_meta = None
        self.stats = WorkerStats()

    # ---------------------------------------------------------------- registration

    def register_kv_caches(self, kv_caches: dict) -> None:
        self.geometry = detect_geometry(kv_caches, self._s, self._heads, on_cpu_platform())
        self._tensors = [kv_caches[n] for n in self.geometry.layer_names]
        if self._link.get() is None:
            log.warning("kvtier connector (worker tp%d pp%d): not registered yet; loads fail "
                        "and saves are skipped until the server answers", self.tp_rank,
                        self.pp_rank)

    def _on_connect(self, client, info) -> None:
        g = self.geometry
        chunk = int(info["chunk_size"])
        check_chunk_size(chunk, self._s.block_size)
        bpc = chunk // self._s.block_size
        staging = self._s.staging_blocks // bpc * bpc
        if staging == 0:
            raise ValueError(f"kvtier.staging_blocks ({self._s.staging_blocks}) must be at least "
                             f"one chunk: {bpc} blocks of {self._s.block_size} tokens for the "
                             f"server's chunk size {chunk}")
        if self._buffer is None or (chunk, staging) != (self._chunk, self._staging_blocks):
            self._make_staging(chunk, staging)
        layers, bs, bpt = len(g.layer_names), self._s.block_size, g.bytes_per_token
        if g.kind == "mla":
            block_bytes = bs * bpt
            layout = {"num_blocks": staging, "block_tokens": bs, "block_bytes": block_bytes,
                      "regions": [(0, layer * staging * block_bytes, block_bytes)
                                  for layer in range(layers)]}
        else:
            layout = paged_layout(layers, staging, bs, bpt)
        client.register_kv_buffers(self.instance_id, self._s.model, self._s.key_world_size,
                                   self.key_rank, [self._buffer], layout)
        self._registered = True

    def _make_staging(self, chunk: int, staging: int) -> None:
        g = self.geometry
        regions = g.regions_per_layer
        layers = len(g.layer_names)
        size = layers * regions * staging * self._s.block_size * g.bytes_per_token
        buffer = HostKvBuffer(size)
        flat = torch.from_numpy(buffer.array()).view(g.dtype)
        kernel_slots = staging * g.ratio
        pairs = []
        if g.kind == "mla":
            stg = flat.view(layers, kernel_slots, g.kernel_block, *g.token_shape)
            for layer, t in enumerate(self._tensors):
                pairs.append(_Pair(t, stg[layer]))
        else:
            stg = flat.view(layers, 2, kernel_slots, g.kernel_block, *g.token_shape)
            for layer, t in enumerate(self._tensors):
                for kv in range(2):
                    # Every view is [blocks, tokens, heads, dim] in logical order.
                    engine = (t[kv] if g.kind == "flash_attn" else t[:, kv]
                              if g.kind == "flashinfer" else t[kv].permute(0, 2, 1, 3))
                    pairs.append(_Pair(engine, stg[layer, kv]))
        self._buffer, self._pairs = buffer, pairs
        self._chunk, self._staging_blocks = chunk, staging
        log.info("kvtier connector (worker tp%d pp%d): %s KV cache, %d layers, %d blocks; "
                 "staging %d blocks (%.1f MiB), instance %d, model %r, rank %d of %d",
                 self.tp_rank, self.pp_rank, g.kind, layers, g.num_blocks, staging,
                 size / 2**20, self.instance_id, self._s.model, self.key_rank,
                 self._s.key_world_size)

    # ---------------------------------------------------------------- copies

    def _kernel_ids(self, block_ids) -> torch.Tensor:
        ids = torch.as_tensor(block_ids, dtype=torch.int64)
        r = self.geometry.ratio
        if r == 1:
            return ids
        return (ids[:, None] * r + torch.arange(r, dtype=torch.int64)).reshape(-1)

    def _to_staging(self, block_ids, first_slot: int) -> None:
        idx = self._kernel_ids(block_ids)
        a = first_slot * self.geometry.ratio
        for p in self._pairs:
            torch.index_select(p.engine, 0, idx, out=p.staging[a:a + idx.numel()])

    def _from_staging(self, block_ids, first_slot: int) -> None:
        idx = self._kernel_ids(block_ids)
        a, b = first_slot * self.geometry.ratio, first_slot * self.geometry.ratio + idx.numel()
        idx_np = idx.numpy()
        for p in self._pairs:
            if p.engine_np is not None:
                p.engine_np[idx_np] = p.staging_np[a:b]
            else:
                p.engine.index_copy_(0, idx, p.staging[a:b])

    def _slot_ids(self, first_chunk: int, end_chunk: int) -> np.ndarray:
        """Block ids for tokens [0, end): the chunks before first_chunk are not touched by the
        server (any valid id will do), the others name staging slots 0, 1, ..."""
        bpc = self._chunk // self._s.block_size
        ids = np.zeros(end_chunk * bpc, dtype=np.uint32)
        ids[first_chunk * bpc:] = np.arange((end_chunk - first_chunk) * bpc, dtype=np.uint32)
        return ids

    # ---------------------------------------------------------------- transfers

    def run(self, meta) -> None:
        """Runs one step's saves, then its loads (once per metadata object)."""
        if meta is None or meta is self._done_meta:
            return
        self._done_meta = meta
        if not isinstance(meta, KvtierConnectorMetadata):
            return
        self._to_release.update(meta.release)
        if not meta.saves and not meta.loads:
            return
        client = self._client()
        if self.stores:
            for job in meta.saves:
                self._save(client, job)
        for job in meta.loads:
            self._load(client, job)

    def _client(self):
        if self.geometry is None or self._disabled:
            return None
        try:
            return self._link.get()
        except ValueError as e:  # the server came back with an incompatible chunk size
            log.error("kvtier connector: %s; the connector is off until the engine restarts", e)
            self._disabled = True
            return None

    def _save(self, client, job: SaveJob) -> None:
        self.stats.save_jobs += 1
        if client is None:
            self.stats.store_errors += 1
            return
        bpc = self._chunk // self._s.block_size
        per_batch = self._staging_blocks // bpc
        c = job.first_chunk
        try:
            while c < job.end_chunk:
                c1 = min(c + per_batch, job.end_chunk)
                blocks = job.block_ids[(c - job.first_chunk) * bpc:(c1 - job.first_chunk) * bpc]
                self._to_staging(blocks, 0)
                r = client.store(self.instance_id, self._slot_ids(c, c1),
                                 hashes=job.hashes[:c1], start=c * self._chunk,
                                 end=c1 * self._chunk, salt=job.salt)
                self.stats.stored_chunks += r["stored_chunks"]
                self.stats.present_chunks += r["present_chunks"]
                self.stats.skipped_chunks += r["skipped_chunks"]
                c = c1
        except KvtierError as e:
            self.stats.store_errors += 1
            self._link.failed(e)
            log.debug("kvtier connector: store for %s failed: %s", job.req_id, e)
        except Exception:  # noqa: BLE001  (a save must never take the engine down)
            self.stats.store_errors += 1
            log.exception("kvtier connector: store for %s failed", job.req_id)

    def _load(self, client, job: LoadJob) -> None:
        self.stats.load_jobs += 1
        bs, chunk = self._s.block_size, self._chunk
        done = job.start_token  # tokens [start_token, done) are in the engine's blocks
        if client is not None:
            per_batch = self._staging_blocks * bs // chunk
            # With MLA the TP ranks share one copy: the first rank's RETRIEVE must not release
            # the lookup's locks for the others (the scheduler releases them a step later).
            rid = "" if self._s.use_mla else job.req_id
            c = job.first_chunk
            try:
                while c < job.end_chunk:
                    c1 = min(c + per_batch, job.end_chunk)
                    got = client.retrieve(self.instance_id, self._slot_ids(c, c1),
                                          hashes=job.hashes[:c1], start=c * chunk,
                                          end=c1 * chunk, request_id=rid, salt=job.salt,
                                          skip_first_n_tokens=job.start_token)
                    hi = min(job.end_token, (c + got) * chunk)
                    if hi > done:
                        blocks = job.block_ids[(done - job.start_token) // bs:
                                               (hi - job.start_token) // bs]
                        self._from_staging(blocks, (done - c * chunk) // bs)
                        self.stats.loaded_tokens += hi - done
                        done = hi
                    self.stats.loaded_chunks += got
                    if got < c1 - c:
                        break
                    c = c1
            except KvtierError as e:
                self._link.failed(e)
                log.debug("kvtier connector: load for %s failed: %s", job.req_id, e)
            except Exception:  # noqa: BLE001  (report the blocks; vLLM recomputes them)
                log.exception("kvtier connector: load for %s failed", job.req_id)
        if done < job.end_token:
            failed = job.block_ids[(done - job.start_token) // bs:]
            self._invalid.update(int(b) for b in failed)
            self.stats.load_failed_blocks += len(failed)
            log.debug("kvtier connector: %s: tokens [%d, %d) did not arrive; %d blocks "
                      "reported for recomputation", job.req_id, done, job.end_token, len(failed))

    # ---------------------------------------------------------------- results

    def get_finished(self, finished_req_ids) -> tuple[set | None, set | None]:
        finished = set(finished_req_ids or ())
        self._recent_finished = [self._recent_finished[1], finished]
        seen = self._recent_finished[0] | finished
        done = {r for r in self._to_release if r in seen}
        self._to_release -= done
        return (done or None), None

    def take_load_errors(self) -> set[int]:
        out, self._invalid = self._invalid, set()
        return out

    def shutdown(self) -> None:
        log.info("kvtier connector (worker tp%d pp%d): %s", self.tp_rank, self.pp_rank,
                 dataclasses.asdict(self.stats))
        client = self._link.current()
        if client is not None and self._registered:
            try:
                client.unregister_kv_buffers(self.instance_id)
            except KvtierError as e:
                log.debug("kvtier connector: unregister failed: %s", e)
        self._link.close()
        self._registered = False
