"""What the engine's KV tensors look like, for the worker half of the vLLM connector
(_vllm_worker.py): the layout kind and block geometry found at ``register_kv_caches``, the KV
head count vLLM's config gives, the platform, and the worker's TP / PP rank."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ._vllm_base import VLLM_AVAILABLE
from ._vllm_config import Settings


@dataclass
class Geometry:
    """What register_kv_caches found out about the engine's KV tensors."""

    kind: str  # flash_attn, flashinfer, cpu, mla or bhnc
    layer_names: list
    num_blocks: int  # vLLM (scheduler) blocks
    kernel_block: int  # tokens per block of the tensors (may divide the scheduler's block)
    ratio: int  # kernel blocks per scheduler block
    dtype: torch.dtype
    token_shape: tuple  # (heads, head_dim), or (latent_dim,) with MLA
    bytes_per_token: int  # of one region (K or V, or the latent)
    device: torch.device  # cpu or cuda:N


def _check_tensor(name, t):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"kvtier connector: KV cache of layer {name!r} is a {type(t).__name__}, "
                        f"not a torch.Tensor")
    if t.device.type not in ("cpu", "cuda"):
        raise RuntimeError(
            f"kvtier connector: the KV cache of layer {name!r} is on {t.device}; only CPU and "
            f"CUDA KV caches are supported")


SHAPES = {
    "bhnc": "[num_blocks, heads, block_size, K+V]",
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
    if len(shape) == 4:
        # vLLM's per-layer view since its KV cache layouts (KVCacheLayout): logical [blocks,
        # heads, tokens, content], the physical order in the strides. K and V (or the latent)
        # are the content, for every backend, MLA included.
        return "bhnc"
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
        if (tuple(t.shape) != tuple(first.shape) or t.dtype != first.dtype
                or t.device != first.device):
            raise ValueError(
                f"kvtier connector: every layer's KV cache must have the same shape, dtype and "
                f"device (one KV cache group); {names[0]!r} is {tuple(first.shape)} "
                f"{first.dtype} on {first.device}, {name!r} is {tuple(t.shape)} {t.dtype} on "
                f"{t.device}")
    shape = tuple(first.shape)
    kind = settings.kv_layout
    if kind == "auto":
        kind = _guess_kind(shape, settings, heads, cpu_platform)
    ok = (len(shape) == 3 if kind == "mla" else len(shape) == 4 if kind == "bhnc" else
          len(shape) == 5 and (shape[1] == 2 if kind == "flashinfer" else shape[0] == 2))
    if not ok:
        raise ValueError(f"kvtier connector: a {kind} KV cache is {SHAPES[kind]}, got {shape}")
    if kind == "bhnc":
        nbk, kb, token_shape = shape[0], shape[2], (shape[1], shape[3])
    elif kind == "mla":
        nbk, kb, token_shape = shape[0], shape[1], shape[2:]
    elif kind == "flash_attn":
        nbk, kb, token_shape = shape[1], shape[2], shape[3:]
    elif kind == "flashinfer":
        nbk, kb, token_shape = shape[0], shape[2], shape[3:]
    else:  # cpu: [2, blocks, heads, tokens, dim]
        nbk, kb, token_shape = shape[1], shape[3], (shape[2], shape[4])
    if kind != "bhnc" and settings.use_mla != (kind == "mla"):
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
                    bytes_per_token=int(np.prod(token_shape)) * elem, device=first.device)


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
