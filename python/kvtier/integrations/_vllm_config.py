"""The kvtier connector's settings: ``kvtier.*`` keys of vLLM's ``kv_connector_extra_config`` plus
what the connector reads from vLLM's own config (block size, model, parallelism, MLA).

Every bad value is a ``ValueError`` that names the key; an unknown ``kvtier.*`` key is a warning
(a typo must not pass silently, nor stop an engine).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from dataclasses import dataclass
from typing import Any

from kvtier._kvtier import DEFAULT_PORT

from ._vllm_events import events_enabled

log = logging.getLogger("kvtier.integrations.vllm")

PREFIX = "kvtier."
KV_LAYOUTS = ("auto", "flash_attn", "flashinfer", "cpu", "mla", "bhnc")
TRANSFERS = ("auto", "gpu", "host")

# key -> (default, one-line description); docs/integrations.md lists the same.
KEYS: dict[str, tuple[Any, str]] = {
    "kvtier.host": ("127.0.0.1", "address of the kvtier server"),
    "kvtier.port": (DEFAULT_PORT, "its ZMQ port (the hand-off socket is @kvtier-server-<port>)"),
    "kvtier.timeout_ms": (5000, "timeout of one request to the server"),
    "kvtier.lookup_timeout_ms": (2000, "how long the scheduler waits for a LOOKUP's result"),
    "kvtier.retry_interval_s": (5.0, "after a failure, how long until the server is tried again"),
    "kvtier.lookup_max_age_s": (10.0, "a lookup older than this is redone (keep it below the "
                                      "server's --pin-ttl-s)"),
    "kvtier.auth_token_file": (None, "the server's --auth-token-file"),
    "kvtier.model": (None, "model name in the cache keys"),
    "kvtier.staging_blocks": (256, "blocks of the worker's staging buffer"),
    "kvtier.kv_layout": ("auto", "auto, flash_attn, flashinfer, cpu, mla or bhnc"),
    "kvtier.transfer": ("auto", "auto, gpu or host: CUDA IPC or the staging buffer"),
    "kvtier.async_load": (False, "load in a worker thread while vLLM parks the request"),
}


@dataclass(frozen=True)
class Settings:
    host: str
    port: int
    timeout_ms: int
    lookup_timeout_ms: int
    retry_interval_s: float
    lookup_max_age_s: float
    auth_token_file: str | None
    model: str
    staging_blocks: int
    kv_layout: str
    transfer: str  # auto, gpu or host (_vllm_paths.choose_transfer)
    async_load: bool  # vLLM's (n, True) path: loads run in a worker thread between steps
    block_size: int
    use_mla: bool
    tp_size: int
    pp_size: int
    load_enabled: bool  # kv_role is kv_consumer or kv_both
    save_enabled: bool  # kv_role is kv_producer or kv_both
    engine_id: str
    # Scheduler steps that may be in flight at once (vLLM's max_concurrent_batches: 2 with async
    # scheduling). A step's saves wait that many steps, until vLLM has processed the step's output
    # (its failed loads) before the next schedule (_vllm_scheduler.py).
    save_delay: int = 1
    load_failure_policy: str = "recompute"  # kv_transfer_config.kv_load_failure_policy
    kv_events: bool = False  # vLLM's enable_kv_cache_events: publish BlockStored (_vllm_events)

    @property
    def key_world_size(self) -> int:
        """The world size the cache keys use. Every TP rank holds its own slice of the heads, so
        a chunk is complete only once every rank stored it; with MLA all TP ranks hold the same
        latent KV, so they share one copy and only pipeline stages count."""
        return self.pp_size if self.use_mla else self.tp_size * self.pp_size

    def key_rank(self, tp_rank: int, pp_rank: int) -> int:
        return pp_rank if self.use_mla else pp_rank * self.tp_size + tp_rank


def _int(key: str, value: Any, low: int, high: int | None = None) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{key} must be an integer, got {value!r}")
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{key} must be an integer, got {value!r}") from None
    if not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ValueError(f"{key} must be an integer, got {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{key} must be {bound}, got {value}")
    return value


def _float(key: str, value: Any, low: float) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{key} must be a number, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key} must be a number, got {value!r}") from None
    if not out >= low:
        raise ValueError(f"{key} must be >= {low}, got {value!r}")
    return out


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{key} must be true or false, got {value!r}")


def _str(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key} must be a non-empty string, got {value!r}")
    return value.strip()


def _dtype_name(dtype: Any) -> str | None:
    if dtype is None:
        return None
    return str(dtype).removeprefix("torch.")


def default_model_key(vllm_config) -> str:
    """``<model>:<kv dtype>``, e.g. ``meta-llama/Llama-3.1-8B:bfloat16``. The KV dtype is part of
    the name because two engines of one model with KV caches of the same width but another dtype
    (float16 / bfloat16, fp8_e4m3 / fp8_e5m2) would otherwise read each other's bytes."""
    model_config = getattr(vllm_config, "model_config", None)
    model = getattr(model_config, "model", None)
    if not model:
        raise ValueError("kvtier.model is not set and vllm_config.model_config.model is empty")
    model = str(model).replace("@", "_")  # '@' separates the fields of an L2 key
    cache_dtype = getattr(getattr(vllm_config, "cache_config", None), "cache_dtype", "auto")
    dtype = _dtype_name(getattr(model_config, "dtype", None)) if cache_dtype in (
        None, "auto") else _dtype_name(cache_dtype)
    key = f"{model}:{dtype}" if dtype else model
    return key + _cpu_backend_tag()


def _cpu_backend_tag() -> str:
    """':cpu' on vLLM's CPU platform in releases whose KV caches are per-layer [blocks, heads,
    tokens, K+V] views (vllm.v1.kv_cache_layout): the CPU backend stores each head's K for the
    whole block, then its V, where the GPU backends keep K and V per token, so the same bytes mean
    different things and their chunks must not meet under one key."""
    try:
        if (importlib.util.find_spec("vllm") is None
                or importlib.util.find_spec("vllm.v1.kv_cache_layout") is None):
            return ""
        from vllm.platforms import current_platform  # type: ignore

        return ":cpu" if current_platform.is_cpu() else ""
    except Exception:  # noqa: BLE001  (no usable vLLM: no tag)
        return ""


def parse(vllm_config) -> Settings:
    """Reads and checks everything; raises ValueError naming the bad key."""
    ktc = getattr(vllm_config, "kv_transfer_config", None)
    if ktc is None:
        raise ValueError("vllm_config.kv_transfer_config is not set")
    extra = getattr(ktc, "kv_connector_extra_config", None) or {}
    if not isinstance(extra, dict):
        raise ValueError(f"kv_connector_extra_config must be a JSON object, got {extra!r}")
    for key in extra:
        if isinstance(key, str) and key.startswith(PREFIX) and key not in KEYS:
            log.warning("kvtier connector: unknown key %r in kv_connector_extra_config "
                        "(known: %s); it is ignored", key, ", ".join(sorted(KEYS)))

    def get(key):
        return extra.get(key, KEYS[key][0])

    host = _str("kvtier.host", get("kvtier.host"))
    port = _int("kvtier.port", get("kvtier.port"), 1, 65535)
    timeout_ms = _int("kvtier.timeout_ms", get("kvtier.timeout_ms"), 1)
    lookup_timeout_ms = _int("kvtier.lookup_timeout_ms", get("kvtier.lookup_timeout_ms"), 1)
    retry = _float("kvtier.retry_interval_s", get("kvtier.retry_interval_s"), 0.0)
    max_age = _float("kvtier.lookup_max_age_s", get("kvtier.lookup_max_age_s"), 0.0)
    token_file = get("kvtier.auth_token_file")
    if token_file is not None:
        token_file = _str("kvtier.auth_token_file", token_file)
        if not os.access(token_file, os.R_OK):
            raise ValueError(f"kvtier.auth_token_file: cannot read {token_file!r}")
    model = get("kvtier.model")
    if model is None:
        model = default_model_key(vllm_config)
    else:
        model = _str("kvtier.model", model)
        if "@" in model:
            raise ValueError(f"kvtier.model must not contain '@', got {model!r}")
    staging = _int("kvtier.staging_blocks", get("kvtier.staging_blocks"), 1)
    layout = get("kvtier.kv_layout")
    if layout not in KV_LAYOUTS:
        raise ValueError(f"kvtier.kv_layout must be one of {', '.join(KV_LAYOUTS)}, "
                         f"got {layout!r}")
    transfer = get("kvtier.transfer")
    if transfer not in TRANSFERS:
        raise ValueError(f"kvtier.transfer must be one of {', '.join(TRANSFERS)}, "
                         f"got {transfer!r}")
    async_load = _bool("kvtier.async_load", get("kvtier.async_load"))

    cache_config = getattr(vllm_config, "cache_config", None)
    block_size = _int("cache_config.block_size", getattr(cache_config, "block_size", None), 1)
    model_config = getattr(vllm_config, "model_config", None)
    use_mla = bool(getattr(model_config, "use_mla", False))
    if layout == "mla" and not use_mla:
        use_mla = True
    parallel = getattr(vllm_config, "parallel_config", None)
    tp = _int("parallel_config.tensor_parallel_size",
              getattr(parallel, "tensor_parallel_size", 1), 1)
    pp = _int("parallel_config.pipeline_parallel_size",
              getattr(parallel, "pipeline_parallel_size", 1), 1)
    if tp * pp > 255:
        raise ValueError(f"kvtier supports at most 255 ranks per model, got tp {tp} x pp {pp}")
    save_delay = _int("max_concurrent_batches",
                      _concurrent_batches(vllm_config, parallel), 1)
    policy = str(getattr(ktc, "kv_load_failure_policy", None) or "recompute")
    role = getattr(ktc, "kv_role", None) or "kv_both"
    if role not in ("kv_producer", "kv_consumer", "kv_both"):
        raise ValueError(f"kv_role must be kv_producer, kv_consumer or kv_both, got {role!r}")
    return Settings(
        host=host, port=port, timeout_ms=timeout_ms, lookup_timeout_ms=lookup_timeout_ms,
        retry_interval_s=retry, lookup_max_age_s=max_age, auth_token_file=token_file, model=model,
        staging_blocks=staging, kv_layout=layout, transfer=transfer, async_load=async_load,
        block_size=block_size,
        use_mla=use_mla, tp_size=tp, pp_size=pp, load_enabled=role in ("kv_consumer", "kv_both"),
        save_enabled=role in ("kv_producer", "kv_both"),
        engine_id=str(getattr(ktc, "engine_id", None) or ""), save_delay=save_delay,
        load_failure_policy=policy, kv_events=events_enabled(vllm_config))


def _concurrent_batches(vllm_config, parallel) -> int:
    """How many scheduled steps vLLM keeps in flight: its max_concurrent_batches where it has one
    (PP size, plus one with async scheduling), else from the same settings."""
    try:
        return int(vllm_config.max_concurrent_batches)
    except Exception:  # noqa: BLE001  (older vLLM, or a config stand-in)
        pass
    pp = int(getattr(parallel, "pipeline_parallel_size", 1) or 1)
    sched = getattr(vllm_config, "scheduler_config", None)
    return pp + (1 if getattr(sched, "async_scheduling", False) else 0)


def check_chunk_size(chunk_size: int, block_size: int) -> None:
    if chunk_size <= 0 or chunk_size % block_size != 0:
        raise ValueError(
            f"the kvtier server's chunk size ({chunk_size} tokens, its --chunk-size) is not a "
            f"multiple of vLLM's block size ({block_size}, --block-size); start the server with "
            f"a multiple of {block_size}")
