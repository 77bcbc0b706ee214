"""vLLM KV connector (v1) over ``kvtier server``: docs/integrations.md.

Load it into vLLM with::

    --kv-transfer-config '{"kv_connector":"KvtierConnector",
                           "kv_connector_module_path":"kvtier.integrations.vllm",
                           "kv_role":"kv_both",
                           "kv_connector_extra_config":{"kvtier.host":"127.0.0.1",
                                                        "kvtier.port":5555}}'

vLLM builds the class twice: in the scheduler process (role SCHEDULER: prefix lookups and the
per-step plan, ``_vllm_scheduler.py``) and in every worker process, one per GPU / TP rank (role
WORKER: the copies, ``_vllm_worker.py``). The scheduler looks up the prompt's chunks, claims a
block-aligned prefix that never includes the last token, and sends retrieve and store plans to the
workers in the step's metadata. The server moves the bytes: straight between L1 and the
engine's CUDA blocks (CUDA IPC), or through a staging buffer in host memory it maps
(``kvtier.transfer``, ``_vllm_paths.py``). Loads are synchronous by default (the blocks are
filled in ``start_load_kv``, before the forward); with ``kvtier.async_load`` a worker thread runs
them while vLLM keeps the request parked, and ``get_finished`` reports them done. Saves run in
``handle_preemptions``, before the forward. Chunks that did not arrive are reported by
``get_block_ids_with_load_errors``: vLLM recomputes them with ``kv_load_failure_policy``
"recompute" and fails the request with its default, "fail".
It implements vLLM's ``SupportsHMA``, so vLLM keeps its hybrid KV cache manager on. kvtier caches
a KV cache of one full-attention group; with any other layout (sliding-window or Mamba groups)
it stays out of the engine, every request a clean miss (``_vllm_groups.py``).
The workers' load and save counters reach vLLM's stats log line and its Prometheus metrics
(``vllm:kvtier_*``) through ``get_kv_connector_stats`` (``_vllm_stats.py``). With vLLM's KV events
on, every chunk a save put in the server is published as a ``BlockStored`` of medium ``KVTIER``,
and ``reset_cache`` as ``AllBlocksCleared`` (``_vllm_events.py``). For prefill/decode
disaggregation over one server, a prefill leg's response carries ``kv_transfer_params`` naming the
chunks it saves, and a decode request that carries them waits until they are in kvtier
(``_vllm_pd.py``).

When vLLM is installed the class derives from its ``KVConnectorBase_V1``; without vLLM it derives
from stand-ins with the same names (``_vllm_base.py``), so the module imports and works anyway.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ._vllm_base import (
    VLLM_AVAILABLE,
    VLLM_IMPORT_ERROR,
    KVConnectorBase_V1,
    KVConnectorMetadata,
    KVConnectorRole,
    KvtierConnectorMetadata,
    RetrievePlan,
    StorePlan,
    SupportsHMA,
    role_name,
)
from ._vllm_config import KEYS, Settings, parse
from ._vllm_groups import group0_block_ids, unserved_reason
from ._vllm_stats import METRICS, KvtierConnectorStats, build_stats

__all__ = [
    "KEYS",
    "VLLM_AVAILABLE",
    "VLLM_IMPORT_ERROR",
    "KVConnectorBase_V1",
    "KVConnectorMetadata",
    "KVConnectorRole",
    "KvtierConnector",
    "KvtierConnectorMetadata",
    "KvtierConnectorStats",
    "METRICS",
    "RetrievePlan",
    "StorePlan",
    "Settings",
]

log = logging.getLogger("kvtier.integrations.vllm")


class KvtierConnector(KVConnectorBase_V1, SupportsHMA):
    """vLLM's ``kv_connector`` name for it is ``KvtierConnector``."""

    if VLLM_AVAILABLE:
        try:  # vLLM's hit-source label: kvtier serves every hit from its L1, host memory
            from vllm.v1.metrics.cache_hit_source import CacheHitSource  # type: ignore

            _cache_hit_source = CacheHitSource.HOST
            del CacheHitSource
        except ImportError:  # older vLLM: no such label
            pass

    def __init__(self, vllm_config, role, kv_cache_config=None):
        try:
            super().__init__(vllm_config, role, kv_cache_config)
        except TypeError:  # vLLM releases whose base took (vllm_config, role) only
            super().__init__(vllm_config, role)
        self.settings = parse(vllm_config)
        self._role_name = role_name(role)
        # A KV cache layout kvtier cannot serve (hybrid groups): load and store nothing.
        self.unserved = unserved_reason(kv_cache_config)
        if self.unserved is not None:
            if self._role_name == "SCHEDULER":
                log.warning("kvtier connector: %s, so kvtier stays out of this engine: no hits, "
                            "no stores. A model with sliding-window and full-attention layers is "
                            "cached when vLLM runs with --disable-hybrid-kv-cache-manager (every "
                            "layer then keeps its full KV in one group); docs/integrations.md",
                            self.unserved)
            self.settings = dataclasses.replace(self.settings, load_enabled=False,
                                                save_enabled=False)
        self._scheduler = self._worker = None
        if self._role_name == "SCHEDULER":
            from ._vllm_scheduler import SchedulerSide

            self._scheduler = SchedulerSide(self.settings)
        elif self._role_name == "WORKER":
            from ._vllm_worker import WorkerSide

            self._worker = WorkerSide(self.settings, vllm_config, kv_cache_config)
        else:
            raise ValueError(f"kvtier connector: unknown role {role!r}")

    # ------------------------------------------------------------ properties and classmethods

    @property
    def requires_kv_delivery(self) -> bool:
        # A cache is best effort: a preempted request never waits for a save to be delivered.
        return False

    @classmethod
    def kv_cache_access(cls, kv_transfer_config):
        """vLLM's KVCacheAccess: the GPU path exports the KV cache through legacy CUDA IPC
        handles, which vLLM's extensible (virtual-memory) KV cache does not have."""
        from vllm.config.kv_transfer import KVCacheAccess  # type: ignore  # only vLLM asks

        extra = getattr(kv_transfer_config, "kv_connector_extra_config", None) or {}
        if extra.get("kvtier.transfer", "auto") == "host":
            return KVCacheAccess.IN_PROCESS
        return KVCacheAccess.LEGACY_IPC

    @classmethod
    def supports_sleep_mode(cls, kv_transfer_config) -> bool:
        """Sleep mode frees and remaps the KV cache: the host path reads it through the same
        tensors afterwards, but the GPU path's CUDA IPC registration would point at freed memory,
        so vLLM refuses sleep mode unless kvtier.transfer is host."""
        extra = getattr(kv_transfer_config, "kv_connector_extra_config", None) or {}
        return extra.get("kvtier.transfer", "auto") == "host"

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config):
        return None  # NHD and HND both work (HND over the host path): chunks are in logical order

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]) -> bool:
        return False  # no per-layer hooks are used

    # ------------------------------------------------------------ scheduler side

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int):
        return self._sched().get_num_new_matched_tokens(request, num_computed_tokens)

    def may_load_async(self, request) -> bool:
        # vLLM's --max-num-inflight-kv-loads queue: with kvtier.async_load any hit loads async.
        return self.settings.async_load and self.settings.load_enabled

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int):
        self._sched().update_state_after_alloc(request, blocks, num_external_tokens)

    def build_connector_meta(self, scheduler_output) -> KVConnectorMetadata:
        return self._sched().build_connector_meta(scheduler_output)

    def update_connector_output(self, connector_output) -> None:
        self._sched().update_connector_output(connector_output)

    def request_finished(self, request, block_ids) -> tuple[bool, dict[str, Any] | None]:
        return self._sched().request_finished(request, block_ids)

    def request_finished_all_groups(self, request,
                                    block_ids) -> tuple[bool, dict[str, Any] | None]:
        """vLLM's call with HMA on: block ids per KV cache group. kvtier serves one group (with
        several it loaded and stored nothing, so no blocks of them are held)."""
        return self._sched().request_finished(request, group0_block_ids(block_ids))

    def reset_cache(self) -> bool | None:
        """vLLM's reset_prefix_cache(reset_connector=True), e.g. after new weights: drops this
        model's chunks from the server's L1 and L2. False when the server did not do it."""
        if self._scheduler is None:
            return None
        return self._scheduler.reset_cache()

    # ------------------------------------------------------------ worker side

    def register_kv_caches(self, kv_caches) -> None:
        if self.unserved is not None:  # no transfers will come: the server gets no buffers
            log.info("kvtier connector (worker): %s; the KV cache is not registered",
                     self.unserved)
            return
        self._work().register_kv_caches(kv_caches)

    def handle_preemptions(self, kv_connector_metadata) -> None:
        # vLLM's first worker call of a step, before the forward: the saves, while their blocks
        # still hold what the request computed (_vllm_worker.py).
        self._work().run_saves(kv_connector_metadata)

    def start_load_kv(self, forward_context, **kwargs: Any) -> None:
        self._work().run_loads(self._connector_metadata)

    def wait_for_layer_load(self, layer_name: str) -> None:
        # Loads finished in start_load_kv (or, async, before vLLM schedules the request): whole
        # requests move outside the forward, so nothing runs inside the model (CUDA-graph safe).
        return None

    def save_kv_layer(self, layer_name: str, kv_layer, attn_metadata, **kwargs: Any) -> None:
        # Saves read the blocks before a later step's forward (handle_preemptions), not layer
        # by layer.
        return None

    def wait_for_save(self) -> None:
        # Saves and loads normally ran already; this covers an engine that skipped those calls.
        self._work().run_loads(self._connector_metadata)

    def get_finished(self, finished_req_ids: set[str]):
        w = self._work()
        w.run_loads(self._connector_metadata)
        return w.get_finished(finished_req_ids)

    def get_block_ids_with_load_errors(self) -> set[int]:
        return self._work().take_load_errors()

    def get_kv_connector_kv_cache_events(self):
        """vLLM's per-step KV events of the worker: a BlockStored per chunk its saves put in the
        server (_vllm_events.py); None when vLLM's KV events are off."""
        if self._worker is None:
            return None
        return self._worker.take_events()

    def take_events(self):
        """The events the scheduler publishes: stored chunks every saving worker reported, and
        AllBlocksCleared after reset_cache."""
        if self._scheduler is None:
            return ()
        return self._scheduler.take_events()

    def get_kv_connector_stats(self) -> KvtierConnectorStats | None:
        """vLLM's per-step stats (its log line and Prometheus metrics, _vllm_stats.py): the
        worker's loads and saves since the last call. The scheduler instance has none."""
        if self._worker is None:
            return None
        return self._worker.take_interval_stats()

    @classmethod
    def build_kv_connector_stats(cls, data: dict[str, Any] | None = None):
        return build_stats(data)

    @classmethod
    def build_prom_metrics(cls, vllm_config, metric_types, labelnames, per_engine_labelvalues):
        from ._vllm_stats import build_prom_metrics

        return build_prom_metrics(vllm_config, metric_types, labelnames, per_engine_labelvalues)

    # ------------------------------------------------------------ both

    def stats(self) -> dict:
        """Counters of this instance (lookups and hits, or loaded / stored chunks)."""
        side = self._scheduler or self._worker
        return dataclasses.asdict(side.stats)

    def shutdown(self) -> None:
        side = self._scheduler or self._worker
        if side is not None:
            side.shutdown()

    def _sched(self):
        if self._scheduler is None:
            raise RuntimeError(f"kvtier connector: scheduler method called on the "
                               f"{self._role_name} instance")
        return self._scheduler

    def _work(self):
        if self._worker is None:
            raise RuntimeError(f"kvtier connector: worker method called on the "
                               f"{self._role_name} instance")
        return self._worker
