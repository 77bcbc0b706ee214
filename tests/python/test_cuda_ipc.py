"""kvtier.cuda_ipc: GPU KV caches handed to a kvtier server through CUDA IPC. Without a CUDA
device only the checks that need none run; the round trip skips."""

import pytest
import torch

from kvtier import cuda_ipc
from kvtier.server import LocalServer

needs_cuda = pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="no CUDA device: the round trip needs one (and a kvtier server built with CUDA)")


def test_available_is_whether_torch_sees_a_device():
    assert cuda_ipc.available() is torch.cuda.is_available()


def test_add_of_a_host_tensor_says_what_to_use_instead():
    with pytest.raises(ValueError, match=r"takes CUDA tensors; this \(4, 16, 2, 8\) tensor is on "
                                         r"cpu \(register host memory as a HostKvBuffer"):
        cuda_ipc.GpuRegions().add(torch.zeros(4, 16, 2, 8))


def test_ipc_handle_formats():
    raw = bytes(range(64))
    assert cuda_ipc._ipc_handle(raw) == raw  # PyTorch before 2.2
    assert cuda_ipc._ipc_handle(b"\x02c" + raw) == raw  # version byte, 'c' (cudaMalloc)
    with pytest.raises(ValueError, match="expandable segment"):
        cuda_ipc._ipc_handle(b"\x02e" + bytes(100))
    with pytest.raises(ValueError, match="10-byte CUDA IPC handle"):
        cuda_ipc._ipc_handle(bytes(10))


@needs_cuda
def test_round_trip_through_a_server():
    chunk, block, blocks, heads, dim = 64, 16, 8, 2, 32
    layers = [torch.randn(2, blocks, block, heads, dim, dtype=torch.float16, device="cuda")
              for _ in range(2)]
    want = [t.clone() for t in layers]
    ids = [5, 2, 7, 0]  # one chunk: 4 blocks of 16 tokens, in any order
    tokens = list(range(1, chunk + 1))

    def regions_of(tensors):
        r = cuda_ipc.GpuRegions()
        for t in tensors:
            r.add(t[0])
            r.add(t[1])
        return r

    with LocalServer(l1_size_gb=0.0625, chunk_size=chunk) as srv:
        client = srv.client(timeout_ms=10000)
        regions = regions_of(layers)
        assert len(regions.buffers) == 2 and len(regions.regions) == 4
        regions.register(client, 7, "cuda-ipc-test", block)
        regions.record()  # the STORE copies what the stream wrote (randn) after this
        assert client.store(7, ids, tokens=tokens)["stored_chunks"] == 1
        for t in layers:
            t.zero_()
        torch.cuda.synchronize()  # a RETRIEVE does not wait for our stream
        assert client.retrieve(7, ids, tokens=tokens) == 1
        for t, w in zip(layers, want):
            assert t[:, ids].cpu().numpy().tobytes() == w[:, ids].cpu().numpy().tobytes()
            others = [b for b in range(blocks) if b not in ids]
            assert not t[:, others].any()
        # A second registration of the same tensors (a reconnect) replaces the first; a new
        # GpuRegions over them (another instance) exports them again. Both serve the chunk.
        regions.register(client, 7, "cuda-ipc-test", block)
        regions_of(layers).register(client, 8, "cuda-ipc-test", block)
        for t in layers:
            t.zero_()
        torch.cuda.synchronize()
        assert client.retrieve(8, [1, 3, 4, 6], tokens=tokens) == 1
        assert client.retrieve(7, ids, tokens=tokens) == 1
        for t, w in zip(layers, want):
            assert t[:, [1, 3, 4, 6]].cpu().numpy().tobytes() == w[:, ids].cpu().numpy().tobytes()
            assert t[:, ids].cpu().numpy().tobytes() == w[:, ids].cpu().numpy().tobytes()
        client.unregister_kv_buffers(7)
        client.unregister_kv_buffers(8)
        client.close()
