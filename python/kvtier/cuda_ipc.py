"""GPU KV caches registered with a kvtier server through CUDA IPC.

A worker whose paged KV cache lives in GPU memory hands the server CUDA IPC handles of the
allocations and a layout over them (``CacheClient.register_gpu_kv_buffers``); the server opens
each handle once and moves blocks between the GPU and its L1 with the GPU's copy engines. Only
handles and offsets cross the socket, never pickles.

    regions = GpuRegions()
    for layer in kv_caches:                       # vLLM flash-attn: [2, blocks, tokens, heads, dim]
        regions.add(layer[0]); regions.add(layer[1])
    regions.register(client, instance_id=1, model="m", block_tokens=16)

``add`` takes any view whose first dimension is the block and whose block is contiguous, so the
flash-attention ([2, blocks, ...]) and FlashInfer ([blocks, 2, ...]) layouts, MLA's one latent
tensor per layer and SGLang's per-layer K and V pools (viewed as [pages, page_size, heads, dim])
all fit. Each STORE waits for an interprocess event (``regions.event``) that ``record()`` records
on the current stream, so the server copies what the model wrote; a RETRIEVE replies once its
copies have landed in the blocks.

Handles come from PyTorch's own exporter (``UntypedStorage._share_cuda_``, what
``torch.multiprocessing`` uses); with ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`` the
allocator exports no plain IPC handle, and ``add`` says so.
"""

from __future__ import annotations

import torch

_HANDLE_BYTES = 64


def available() -> bool:
    """True when PyTorch sees a CUDA device (this process could export a GPU KV cache)."""
    return torch.cuda.is_available()


def device_uuid(device) -> str:
    """The device's UUID, which names it across processes (ordinals do not)."""
    props = torch.cuda.get_device_properties(torch.device(device))
    if not hasattr(props, "uuid"):
        raise ValueError(f"PyTorch {torch.__version__} does not report device UUIDs; the CUDA "
                         f"path needs PyTorch 2.0 or later")
    return str(props.uuid)


def _storage(t: torch.Tensor):
    if hasattr(t, "untyped_storage"):  # PyTorch >= 2.0
        return t.untyped_storage()
    return t.storage().untyped()  # 1.13


def _ipc_handle(shared: bytes) -> bytes:
    """The cudaIpcMemHandle_t inside what ``_share_cuda_`` returned. PyTorch before 2.2 returns
    the 64 bytes themselves; later releases prefix a version byte and a type byte ('c' for a
    cudaMalloc block, 'e' for an expandable segment, which has no such handle)."""
    shared = bytes(shared)
    if len(shared) == _HANDLE_BYTES:
        return shared
    if len(shared) == _HANDLE_BYTES + 2 and shared[1:2] == b"c":
        return shared[2:]
    if len(shared) > 1 and shared[1:2] == b"e":
        raise ValueError("this tensor lives in an expandable segment, which has no CUDA IPC "
                         "handle: unset PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True for the "
                         "KV cache (or use the host path)")
    raise ValueError(f"PyTorch exported a {len(shared)}-byte CUDA IPC handle of a kind kvtier "
                     f"does not know")


class GpuRegions:
    """Regions over GPU tensors, and the exported allocations behind them (one per storage)."""

    def __init__(self):
        self.buffers: list[tuple[bytes, int, int]] = []  # (ipc handle, offset, size)
        self.regions: list[tuple[int, int, int]] = []  # (buffer index, offset, block stride)
        self.num_blocks = None
        self.block_bytes = None
        self.device = None
        self.event = None
        self._by_storage: dict[int, int] = {}

    def add(self, blocks: torch.Tensor) -> None:
        """One region: ``blocks`` is [num_blocks, ...] on the GPU, each block contiguous."""
        if not blocks.is_cuda:
            raise ValueError(f"GpuRegions takes CUDA tensors; this {tuple(blocks.shape)} tensor "
                             f"is on {blocks.device} (register host memory as a HostKvBuffer "
                             f"with register_kv_buffers instead)")
        if blocks.dim() < 2 or blocks.shape[0] == 0:
            raise ValueError(f"a region is [num_blocks, ...] with at least one block, got "
                             f"{tuple(blocks.shape)}")
        if not blocks[0].is_contiguous():
            raise ValueError(f"a block of this {tuple(blocks.shape)} view is not contiguous "
                             f"(strides {blocks.stride()}): the server copies whole blocks")
        if self.device is None:
            self.device = blocks.device
        elif blocks.device != self.device:
            raise ValueError("all regions of one registration must be on one device")
        block_bytes = blocks[0].numel() * blocks.element_size()
        if self.num_blocks is not None and (self.num_blocks, self.block_bytes) != (
                blocks.shape[0], block_bytes):
            raise ValueError("every region needs the same number of blocks and block size")
        self.num_blocks, self.block_bytes = blocks.shape[0], block_bytes
        storage = _storage(blocks)
        index = self._by_storage.get(storage.data_ptr())
        if index is None:
            info = storage._share_cuda_()  # (device, handle, size, offset in the allocation, ...)
            index = len(self.buffers)
            self.buffers.append((_ipc_handle(info[1]), int(info[3]), storage.nbytes()))
            self._by_storage[storage.data_ptr()] = index
        self.regions.append((index, blocks.data_ptr() - storage.data_ptr(),
                             blocks.stride(0) * blocks.element_size()))

    def layout(self, block_tokens: int) -> dict:
        return {"num_blocks": self.num_blocks, "block_tokens": block_tokens,
                "block_bytes": self.block_bytes, "regions": list(self.regions)}

    def register(self, client, instance_id, model, block_tokens, world_size=1, rank=0) -> None:
        """Registers every region with the server, with an event STOREs wait for."""
        if self.event is None:
            self.event = torch.cuda.Event(interprocess=True, blocking=False)
            self.event.record(torch.cuda.current_stream(self.device))
        client.register_gpu_kv_buffers(instance_id, model, world_size, rank, self.buffers,
                                       device_uuid(self.device), self.layout(block_tokens),
                                       event_handle=bytes(self.event.ipc_handle()))

    def record(self) -> None:
        """Marks what the current stream has written so far as what the next STORE copies."""
        if self.event is None:
            raise RuntimeError("GpuRegions.record() before register()")
        self.event.record(torch.cuda.current_stream(self.device))
