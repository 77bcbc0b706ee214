"""How a worker of the kvtier vLLM connector moves KV bytes: ``GpuPath`` (the server copies
straight between the engine's CUDA blocks and L1) or ``HostPath`` (a staging buffer in host
memory that the server maps). ``choose_transfer`` picks one from ``kvtier.transfer``.

Both answer the same questions for one STORE or RETRIEVE of chunks [c, c1): which block ids to
send (they cover tokens [0, c1 * chunk); the server touches only [c * chunk, c1 * chunk), past
``skip_first_n_tokens`` on a RETRIEVE, so the ids before that are placeholders, 0), what to copy
in this process before a STORE, and after a RETRIEVE.

- ``GpuPath`` registers the engine's own tensors through CUDA IPC (``kvtier.cuda_ipc``): one
  region per layer and K/V (per layer with MLA), the kernel's block as the server's block. The
  ids are the engine's kernel block ids; nothing is copied here. A STORE waits for an event
  recorded just before it (so it copies what the forward wrote), a RETRIEVE replies once its
  copies have landed. The server writes whole chunks in token order, so the path needs
  token-major blocks (FlashAttention / FlashInfer NHD, MLA), and a load also names the
  request's blocks for the rest of its last chunk (``RetrievePlan.tail_block_ids``), tokens vLLM
  recomputes next anyway.
- ``HostPath`` registers a bounded memfd (``HostKvBuffer``) laid out as the server's paged
  layout, ``staging_blocks`` blocks per region. A torch gather copies the engine's blocks into
  staging slots before a STORE; after a RETRIEVE a scatter (numpy fancy assignment on byte views)
  copies the slots into the engine's blocks; no Python loop runs over tokens or blocks. CUDA
  tensors are gathered / scattered on the GPU, with one copy to or from the staging view.

Chunks hold each block's K and V in logical [tokens, heads, dim] order on both paths, so engines
with either path or any layout (HND, the CPU backend's) read each other's chunks.
"""

from __future__ import annotations

import logging

import numpy as np
import torch

from kvtier._kvtier import HostKvBuffer, paged_layout

log = logging.getLogger("kvtier.integrations.vllm")

TOKEN_MAJOR_KINDS = ("flash_attn", "flashinfer", "mla", "bhnc")
# Kinds whose layer is one region (the token's whole content); the others have a K and a V region.
ONE_REGION_KINDS = ("mla", "bhnc")


def choose_transfer(setting: str, is_cuda: bool, kind: str, token_major: bool) -> str:
    """'gpu' or 'host' for ``kvtier.transfer`` = `setting` (auto, gpu, host) and KV tensors that
    are or are not CUDA tensors, of layout `kind`, whose blocks are or are not token-major
    (NHD). Raises ValueError when `setting` is gpu and the tensors do not allow it."""
    gpu_ok = is_cuda and kind in TOKEN_MAJOR_KINDS and token_major
    if setting == "host":
        return "host"
    if setting == "gpu" and not gpu_ok:
        why = ("the KV cache is not on a CUDA device" if not is_cuda else
               f"the {kind} KV cache's blocks do not hold whole tokens in order (HND or the CPU "
               f"backend's layout), and the server copies whole blocks")
        raise ValueError(f"kvtier connector: kvtier.transfer is gpu but {why}; use "
                         f"kvtier.transfer auto or host")
    return "gpu" if gpu_ok else "host"


def region_views(g, tensors: list) -> list:
    """A [kernel blocks, kernel block tokens, *token shape] view per layer and K/V (per layer with
    MLA), in logical order, in the order the server's regions and the chunks' bytes use."""
    if g.kind == "mla":
        return list(tensors)
    if g.kind == "bhnc":  # [blocks, heads, tokens, K+V] -> [blocks, tokens, heads, K+V]
        return [t.permute(0, 2, 1, 3) for t in tensors]
    views = []
    for t in tensors:
        for kv in range(2):
            views.append(t[kv] if g.kind == "flash_attn" else t[:, kv] if g.kind == "flashinfer"
                         else t[kv].permute(0, 2, 1, 3))  # cpu: [blocks, heads, tokens, dim]
    return views


def kernel_ids(block_ids, ratio: int) -> np.ndarray:
    """The kernel blocks (int64) of scheduler blocks `block_ids`, `ratio` kernel blocks each."""
    ids = np.asarray(block_ids, dtype=np.int64)
    if ratio == 1:
        return ids
    return (ids[:, None] * ratio + np.arange(ratio, dtype=np.int64)).reshape(-1)


class GpuPath:
    name = "gpu"

    def __init__(self, g, views: list, block_size: int, regions=None):
        if regions is None:
            from kvtier.cuda_ipc import GpuRegions  # only here: host-only engines never need it

            regions = GpuRegions()
        self._g, self._bs = g, block_size
        self.regions = regions  # a GpuRegions (tests pass a stand-in over host memory)
        for v in views:
            self.regions.add(v)  # ValueError / RuntimeError when a view cannot be exported
        self._chunk = 0
        self._per_call = 1

    def register(self, client, info: dict, who: tuple) -> str:
        self._chunk = int(info["chunk_size"])
        # No staging bound: a whole job per call, up to what the server takes.
        self._per_call = max(1, int(info.get("max_chunks_per_request") or 1 << 16))
        instance_id, model, world_size, rank = who
        self.regions.register(client, instance_id, model, self._g.kernel_block, world_size, rank)
        return (f"GPU blocks registered in place (CUDA IPC, {len(self.regions.buffers)} "
                f"allocation(s))")

    def chunks_per_call(self) -> int:
        return self._per_call

    def _ids(self, end_chunk: int, first_token: int, block_ids) -> np.ndarray:
        """Kernel block ids for tokens [0, end_chunk * chunk): `block_ids` (scheduler blocks)
        from first_token on, placeholders before."""
        kb = self._g.kernel_block
        ids = np.zeros(end_chunk * self._chunk // kb, dtype=np.uint32)
        a = first_token // kb
        ids[a:] = kernel_ids(block_ids, self._g.ratio)[:ids.size - a]
        return ids

    def store_ids(self, block_ids, c: int, c1: int) -> np.ndarray:
        self.regions.record()  # the STORE waits for what the stream (the forward) wrote so far
        return self._ids(c1, c * self._chunk, block_ids)

    def load_end(self, job) -> int:
        """The chunk a load can go up to: its last chunk only if every block of it is named."""
        named = job.end_token + len(job.tail_block_ids) * self._bs
        if named >= job.end_chunk * self._chunk:
            return job.end_chunk
        return job.end_token // self._chunk  # tokens after that are reported and recomputed

    def load_ids(self, job, c: int, c1: int) -> np.ndarray:
        return self._ids(c1, job.start_token, list(job.block_ids) + list(job.tail_block_ids))

    def before_loads(self) -> None:
        # The server's copies do not wait for this stream: kernels still queued on it may use
        # blocks vLLM has just handed to a loading request.
        torch.cuda.current_stream(self.regions.device).synchronize()

    def loaded(self, block_ids, first_slot: int) -> None:
        return None  # the server wrote the engine's blocks itself


class _Pair:
    """One region (a layer's K, V or latent): the engine's view [blocks, tokens, ...] in logical
    order and its staging slots. Gathers use torch.index_select; on host tensors scatters use
    numpy fancy assignment on byte views of the same memory, which copies a block's bytes at
    memcpy speed where torch 1.13's index_copy_ / index_put_ go element by element (loads of
    bench/vllm_connector.py: 2.3-3.6 GB/s with index_copy_, 5-10 GB/s this way)."""

    def __init__(self, engine: torch.Tensor, staging: torch.Tensor):
        self.engine, self.staging = engine, staging
        self.engine_np = self.staging_np = None
        if engine.is_cuda:  # scattered by index_copy_ on the GPU
            return
        try:
            e8, s8 = engine.view(torch.uint8), staging.view(torch.uint8)
        except RuntimeError:  # no byte view (last dim not dense): torch's index_copy_
            return
        try:  # one row of bytes per block where a block is contiguous (NHD)
            e8, s8 = e8.view(e8.shape[0], -1), s8.view(s8.shape[0], -1)
        except RuntimeError:  # HND / CPU backend: [blocks, tokens, heads, dim bytes]
            pass
        self.engine_np, self.staging_np = e8.numpy(), s8.numpy()


class HostPath:
    name = "host"

    def __init__(self, g, views: list, block_size: int, staging_blocks: int):
        self._g, self._views, self._bs, self._want = g, views, block_size, staging_blocks
        self._buffer = None
        self._pairs: list = []
        self._chunk = 0
        self._staging = 0  # blocks per region

    def register(self, client, info: dict, who: tuple) -> str:
        g, bs = self._g, self._bs
        chunk = int(info["chunk_size"])
        bpc = chunk // bs
        staging = self._want // bpc * bpc
        if staging == 0:
            raise ValueError(f"kvtier.staging_blocks ({self._want}) must be at least one chunk: "
                             f"{bpc} blocks of {bs} tokens for the server's chunk size {chunk}")
        if self._buffer is None or (chunk, staging) != (self._chunk, self._staging):
            self._make_staging(chunk, staging)
        layers = len(g.layer_names)
        if g.kind in ONE_REGION_KINDS:
            block_bytes = bs * g.bytes_per_token
            layout = {"num_blocks": staging, "block_tokens": bs, "block_bytes": block_bytes,
                      "regions": [(0, layer * staging * block_bytes, block_bytes)
                                  for layer in range(layers)]}
        else:
            layout = paged_layout(layers, staging, bs, g.bytes_per_token)
        instance_id, model, world_size, rank = who
        client.register_kv_buffers(instance_id, model, world_size, rank, [self._buffer], layout)
        return f"staging {staging} blocks ({self._buffer.size / 2**20:.1f} MiB)"

    def _make_staging(self, chunk: int, staging: int) -> None:
        g = self._g
        size = len(self._views) * staging * self._bs * g.bytes_per_token
        buffer = HostKvBuffer(size)
        flat = torch.from_numpy(buffer.array()).view(g.dtype)
        stg = flat.view(len(self._views), staging * g.ratio, g.kernel_block, *g.token_shape)
        self._pairs = [_Pair(v, stg[i]) for i, v in enumerate(self._views)]
        self._buffer, self._chunk, self._staging = buffer, chunk, staging

    def chunks_per_call(self) -> int:
        return self._staging // (self._chunk // self._bs)

    def _slot_ids(self, first_chunk: int, end_chunk: int) -> np.ndarray:
        """Placeholders for the chunks before first_chunk, then staging slots 0, 1, ..."""
        bpc = self._chunk // self._bs
        ids = np.zeros(end_chunk * bpc, dtype=np.uint32)
        ids[first_chunk * bpc:] = np.arange((end_chunk - first_chunk) * bpc, dtype=np.uint32)
        return ids

    def _index(self, block_ids) -> torch.Tensor:
        idx = torch.from_numpy(kernel_ids(block_ids, self._g.ratio))
        return idx.to(self._g.device) if self._g.device.type == "cuda" else idx

    def store_ids(self, block_ids, c: int, c1: int) -> np.ndarray:
        self._to_staging(block_ids, 0)
        return self._slot_ids(c, c1)

    def _to_staging(self, block_ids, first_slot: int) -> None:
        idx = self._index(block_ids)
        a = first_slot * self._g.ratio
        for p in self._pairs:
            dst = p.staging[a:a + idx.numel()]
            if p.engine.is_cuda:  # gather on the GPU, then one copy down (after the forward)
                dst.copy_(torch.index_select(p.engine, 0, idx))
            else:
                torch.index_select(p.engine, 0, idx, out=dst)

    def load_end(self, job) -> int:
        return job.end_chunk

    def load_ids(self, job, c: int, c1: int) -> np.ndarray:
        return self._slot_ids(c, c1)

    def before_loads(self) -> None:
        return None  # copies into the engine's tensors run on its own stream, in order

    def loaded(self, block_ids, first_slot: int) -> None:
        self._from_staging(block_ids, first_slot)

    def _from_staging(self, block_ids, first_slot: int) -> None:
        idx = self._index(block_ids)
        a = first_slot * self._g.ratio
        b = a + idx.numel()
        idx_np = None if idx.is_cuda else idx.numpy()
        for p in self._pairs:
            if p.engine.is_cuda:  # one copy up, then the scatter on the GPU
                p.engine.index_copy_(0, idx, p.staging[a:b].to(p.engine.device))
            elif p.engine_np is not None:
                p.engine_np[idx_np] = p.staging_np[a:b]
            else:
                p.engine.index_copy_(0, idx, p.staging[a:b])
