"""The worker's transfer counters in vLLM's own KV-connector stats (its log line and Prometheus).

vLLM's model runner asks every step for ``get_kv_connector_stats()``: what the connector did
since the last call, as a ``KVConnectorStats`` whose ``data`` is plain numbers (it is pickled to
the scheduler and sent on to the front end). The outputs of all workers are merged with
``aggregate``, the scheduler passes ``data`` on, and the front end rebuilds the object with the
connector class's ``build_kv_connector_stats`` for its log line (``reduce``) and hands ``data``
to the metrics ``build_prom_metrics`` made. Every kvtier counter is a sum, so merging workers
or steps adds them up: with tensor parallelism each rank moves its own share of every chunk, so
chunk counts grow with the number of ranks and bytes add up to what moved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._vllm_base import VLLM_AVAILABLE

# data key -> (Prometheus name, help text). Counters: Prometheus adds "_total" to the names.
METRICS: dict[str, tuple[str, str]] = {
    "loaded_chunks": ("vllm:kvtier_loaded_chunks",
                      "Chunks kvtier retrieved from its server into vLLM's KV cache."),
    "loaded_bytes": ("vllm:kvtier_loaded_bytes",
                     "Bytes kvtier wrote into vLLM's KV cache from its server."),
    "load_failed_blocks": ("vllm:kvtier_load_failed_blocks",
                           "vLLM blocks a kvtier load did not fill (reported to vLLM, which "
                           "recomputes them or fails the request)."),
    "load_seconds": ("vllm:kvtier_load_seconds",
                     "Seconds spent in kvtier loads (RETRIEVE plans), summed over workers."),
    "saved_chunks": ("vllm:kvtier_saved_chunks",
                     "Chunks kvtier newly stored on its server from vLLM's KV cache."),
    "saved_bytes": ("vllm:kvtier_saved_bytes",
                    "Bytes of the chunks kvtier newly stored on its server."),
    "save_failures": ("vllm:kvtier_save_failures",
                      "kvtier saves (STORE plans) that failed or were skipped (no server)."),
    "save_seconds": ("vllm:kvtier_save_seconds",
                     "Seconds spent in kvtier saves (STORE plans), summed over workers."),
}
_FLOATS = ("load_seconds", "save_seconds")


def zero_counters() -> dict[str, int | float]:
    return {k: (0.0 if k in _FLOATS else 0) for k in METRICS}


if VLLM_AVAILABLE:
    try:
        from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (  # type: ignore
            KVConnectorStats as _StatsBase,
        )
    except ImportError:  # a vLLM without connector stats: the stand-in below
        _StatsBase = None
else:
    _StatsBase = None

if _StatsBase is None:

    @dataclass
    class _StatsBase:  # type: ignore[no-redef]
        """vLLM's KVConnectorStats shape: a dict of serializable numbers."""

        data: dict[str, Any] = field(default_factory=dict)

        def to_dict(self) -> dict[str, Any]:
            return self.data


@dataclass
class KvtierConnectorStats(_StatsBase):
    """kvtier's counters over one interval (a step of one worker, or what was merged)."""

    def __post_init__(self):
        given = dict(self.data or {})
        bad = [k for k in given if k not in METRICS]
        if bad:
            raise ValueError(f"kvtier connector stats: unknown counters {bad}; expected "
                             f"{sorted(METRICS)}")
        self.data = zero_counters()
        self.data.update(given)

    def reset(self) -> None:
        self.data = zero_counters()

    def aggregate(self, other) -> KvtierConnectorStats:
        if other is None:
            return self
        if not isinstance(other, KvtierConnectorStats):
            raise TypeError(f"kvtier connector stats cannot be merged with "
                            f"{type(other).__name__}")
        for k, v in other.data.items():
            self.data[k] = self.data.get(k, 0) + v
        return self

    def reduce(self) -> dict[str, int | float]:
        """The log line's values: totals of the interval, sizes in MiB, rates in GiB/s."""
        d = self.data
        mib = 1 << 20

        def rate(nbytes, secs):
            return round(nbytes / secs / (1 << 30), 3) if secs > 0 else 0.0

        return {
            "kvtier loaded chunks": d["loaded_chunks"],
            "kvtier loaded MiB": round(d["loaded_bytes"] / mib, 3),
            "kvtier load GiB/s": rate(d["loaded_bytes"], d["load_seconds"]),
            "kvtier load failed blocks": d["load_failed_blocks"],
            "kvtier saved chunks": d["saved_chunks"],
            "kvtier saved MiB": round(d["saved_bytes"] / mib, 3),
            "kvtier save GiB/s": rate(d["saved_bytes"], d["save_seconds"]),
            "kvtier save failures": d["save_failures"],
        }

    def is_empty(self) -> bool:
        return not any(self.data.values())


class Interval:
    """Turns the worker's ever-growing counters into per-interval deltas: counters are bumped
    by whichever thread does the transfer, and only read here, so no lock is needed (a bump
    that lands during a read shows up in the next interval)."""

    def __init__(self):
        self._last = zero_counters()

    def take(self, now: dict[str, int | float]) -> KvtierConnectorStats | None:
        delta = {k: now[k] - self._last[k] for k in METRICS}
        self._last = {k: now[k] for k in METRICS}
        out = KvtierConnectorStats(data=delta)
        return None if out.is_empty() else out


def build_stats(data: dict[str, Any] | None) -> KvtierConnectorStats:
    return KvtierConnectorStats(data=dict(data or {}))


def build_prom_metrics(vllm_config, metric_types, labelnames, per_engine_labelvalues):
    """vLLM's KVConnectorPromMetrics for kvtier: one counter per METRICS entry, a child per
    engine (vLLM's labels: model name and engine index)."""
    from vllm.distributed.kv_transfer.kv_connector.v1.metrics import (  # type: ignore
        KVConnectorPromMetrics,
    )

    class KvtierPromMetrics(KVConnectorPromMetrics):
        def __init__(self):
            super().__init__(vllm_config, metric_types, labelnames, per_engine_labelvalues)
            self.counters: dict[str, dict[int, Any]] = {}
            for key, (name, doc) in METRICS.items():
                metric = self._counter_cls(name=name, documentation=doc, labelnames=labelnames)
                self.counters[key] = {idx: metric.labels(*values)
                                      for idx, values in per_engine_labelvalues.items()}

        def observe(self, transfer_stats_data: dict[str, Any], engine_idx: int = 0):
            for key, value in (transfer_stats_data or {}).items():
                per_engine = self.counters.get(key)
                if per_engine is not None and value > 0:
                    per_engine[engine_idx].inc(value)

    return KvtierPromMetrics()
