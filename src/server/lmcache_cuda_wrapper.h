// Where a tensor handed over by one of LMCache's CUDA IPC wrappers lives, decoded from the
// wrapper's ext-1 payload (lmcache 0.5.6, platform/base/ipc_wire.py; docs/lmcache-protocol.md):
// - "cuda" (CudaIPCWrapper, the default): `handle` is torch's UntypedStorage._share_cuda_()
//   8-tuple (device, storage handle, storage bytes, storage offset in its allocation, ref-counter
//   file, ref-counter offset, event handle, event sync required). The storage handle is torch's
//   ShareableHandle: a version byte, 'c' and the 64-byte cudaIpcMemHandle_t of the cudaMalloc
//   block ('e', an expandable segment, is VMM memory that legacy IPC cannot open).
// - "cuda_raw" (RawCudaIPCWrapper, --isolated-ipc): `ipc_handle` (64 bytes), `alloc_offset` (of
//   the tensor's first byte in the allocation) and `nbytes`; its metadata's storage_offset is 0.
// The tensor's view (dtype, shape, stride, storage offset, device) is the codec's TensorDesc.
// Thread-safety: free functions over their arguments only.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "cuda/gpu_memory.h"
#include "server/lmcache_codec.h"

namespace kvtier::lmcache {

struct CudaBuffer {
  // The tensor's storage: the allocation's IPC handle, the storage's offset in it, its size and
  // device. A TensorDesc's storage_offset and strides count from memory.offset.
  cuda::IpcMemory::Export memory;
  // "cuda" only: the event torch recorded when it shared the storage, which an importer waits
  // for once (torch's own importer does); empty when there is none or none is required.
  std::string ready_event;
};

// "cuda" or "cuda_raw": the wrappers DecodeCudaBuffer reads.
bool IsCudaWrapper(std::string_view type);

// `wire` is the ext-1 payload `desc` was decoded from (a msgpack map tagged "type"). The fields
// of desc's wrapper type are checked as LMCache's decoder checks them (unknown ones refused);
// "type", "version" and "metadata" are the codec's.
Result<CudaBuffer> DecodeCudaBuffer(const TensorDesc& desc, std::string_view wire);

}  // namespace kvtier::lmcache
