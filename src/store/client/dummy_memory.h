// A dummy client's shared memory: the memfd regions it hands to its node (the mem pool, region
// 1, and the local buffer, region 2; a size of 0 creates none; then memfds the caller shares with
// RegisterSharedMemory, and GPU buffers it registers, regions 3, 4, ...), the mem-pool allocator
// behind AllocFromMemPool, and the translation of a pointer range in this process into (region
// id, offset) that requests carry. The node checks every range again against what was
// registered; the checks here only give the caller a clear error without a round trip.
// AllocFromMemPool hands out page-aligned allocations and never takes them back (StoreClient has
// no free, as in Mooncake): the pool lives until the client is destroyed.
// Thread-safe: shared regions are added while other threads translate; regions are never
// removed, so their fds stay open as long as this object lives.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <vector>

#include "common/memfd.h"
#include "common/status.h"
#include "cuda/gpu_memory.h"
#include "store/protocol/dummy_protocol.h"
#include "store/protocol/store_errors.h"
#include "wire/fd_passing.h"

namespace kvtier::store {

class DummyMemory {
 public:
  static constexpr uint64_t kMemPoolRegion = 1;
  static constexpr uint64_t kLocalBufferRegion = 2;
  static constexpr uint64_t kFirstSharedRegion = 3;
  static constexpr uint64_t kMemPoolAlignment = 4096;

  // What the node is told about a region (kRegisterRegion; a shared one is also registered as
  // one buffer covering all of it).
  struct RegionView {
    uint64_t id = 0;
    dummy::RegionKind kind = dummy::RegionKind::kMemPool;
    uint64_t size = 0;
    int fd = -1;  // owned by this DummyMemory; -1 for a GPU region
    bool shared = false;
    std::optional<cuda::IpcMemory::Export> gpu;  // a GPU region: how the node opens it
  };

  // A caller's memfd, checked and duplicated, not added yet (the node must accept it first).
  struct SharedRegion {
    uint64_t id = 0;
    uint8_t* base = nullptr;
    uint64_t size = 0;
    wire::UniqueFd fd;                           // a memfd region
    std::optional<cuda::IpcMemory::Export> gpu;  // a GPU region
    RegionView view() const {
      return RegionView{id, dummy::RegionKind::kMemPool, size, fd.get(), true, gpu};
    }
  };

  static Result<DummyMemory> Create(uint64_t mem_pool_size, uint64_t local_buffer_size);
  DummyMemory(DummyMemory&& other) noexcept;
  DummyMemory& operator=(DummyMemory&&) = delete;

  // (region, offset, len) when [ptr, ptr + len) lies inside one region; nullopt otherwise.
  std::optional<dummy::Range> Translate(const void* ptr, uint64_t len) const;
  // Like Translate, but only mem-pool regions (the pool and shared memory): where registered
  // buffers must come from.
  std::optional<dummy::Range> TranslateMemPool(const void* ptr, uint64_t len) const;

  // RegisterSharedMemory's checks: arguments, `fd` a memfd sealed against shrinking of at least
  // `size` bytes, no overlap with a region, the region limit. INVALID_PARAMS naming what is wrong.
  Result<SharedRegion> PrepareShared(void* base, uint64_t size, int fd) const;
  // The same for [base, base + size) of this process's GPU memory (one cudaMalloc allocation),
  // exported for the node through CUDA IPC.
  Result<SharedRegion> PrepareGpu(void* base, uint64_t size) const;
  void AddShared(SharedRegion region);
  // True when exactly [base, base + size) is already shared.
  bool IsShared(const void* base, uint64_t size) const;
  // True when a GPU region starts at `base`.
  bool IsGpuRegion(const void* base) const;

  // Every region, in id order (a copy: safe while regions are added).
  std::vector<RegionView> Regions() const;

  Result<void*> AllocFromMemPool(size_t size);

  // The local buffer's bytes [offset, offset + len) when inside it, else nullptr.
  uint8_t* LocalBuffer(uint64_t offset, uint64_t len) const;
  uint64_t local_buffer_size() const { return local_size_; }
  uint64_t mem_pool_size() const { return pool_size_; }
  uint64_t mem_pool_used() const;

 private:
  struct Region {
    uint64_t id = 0;
    dummy::RegionKind kind = dummy::RegionKind::kMemPool;
    uint8_t* data = nullptr;
    uint64_t size = 0;
    MappedFile owned;       // the pool and the local buffer: created (and mapped) here
    wire::UniqueFd shared;  // a caller's memfd (duplicate); the caller owns the mapping
    std::optional<cuda::IpcMemory::Export> gpu;  // a caller's GPU memory; the caller owns it
    int fd() const { return owned.valid() ? owned.fd() : shared.get(); }
  };
  DummyMemory() = default;
  // An id and no overlap with any region (both kinds of shared region).
  Result<SharedRegion> NewShared(void* base, uint64_t size) const;

  mutable std::shared_mutex regions_mu_;  // guards regions_; the fields below are set at Create
  std::vector<Region> regions_;
  uint8_t* pool_data_ = nullptr;
  uint64_t pool_size_ = 0;
  uint8_t* local_data_ = nullptr;
  uint64_t local_size_ = 0;

  mutable std::mutex pool_mu_;
  uint64_t pool_used_ = 0;  // bump pointer into the mem pool
};

}  // namespace kvtier::store
