// Memory objects of the Mooncake-compatible store API (kvtier.store):
//  - BufferHandle: the bytes of one object read by get_buffer / batch_get_buffer, owned by the
//    handle; ptr(), size(), len() and the buffer protocol (memoryview, numpy, torch.frombuffer).
//  - MooncakeHostMemAllocator: host memory a store node can map. Every alloc is a memfd of its own
//    (sealed against shrinking) mapped into this process, so register_buffer of a pointer inside
//    it shares that memfd with the node (zero copy in dummy mode, where registered memory must
//    otherwise come from alloc_from_mem_pool). free() releases the pages, not the addresses.
// Thread-safety: the allocator's table is guarded by a mutex; a BufferHandle is immutable.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace kvtier {

// One allocation of MooncakeHostMemAllocator: mapped at `base`, `size` bytes, backed by `fd`.
struct HostRegion {
  void* base = nullptr;
  size_t size = 0;
  int fd = -1;
};

// The allocation that holds [ptr, ptr + size), if MooncakeHostMemAllocator made one.
std::optional<HostRegion> FindHostRegion(uintptr_t ptr, size_t size);

// A BufferHandle owning `bytes`.
pybind11::object MakeBufferHandle(std::string bytes);

// Adds BufferHandle and MooncakeHostMemAllocator to `m`.
void InitStoreBufferBindings(pybind11::module_& m);

}  // namespace kvtier
