// A dummy client's shared memory: the memfd regions it hands to its node (the mem pool, region
// 1, and the local buffer, region 2; a size of 0 creates none), the mem-pool allocator behind
// AllocFromMemPool, and the translation of a pointer range in this process into
// (region id, offset) that requests carry. The node checks every range again against what was
// registered; the checks here only give the caller a clear error without a round trip.
// AllocFromMemPool hands out page-aligned blocks and never takes them back (StoreClient has no
// free, as in Mooncake): the pool lives until the client is destroyed.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "common/memfd.h"
#include "common/status.h"
#include "store/common/dummy_protocol.h"
#include "store/common/store_status.h"

namespace kvtier::store {

class DummyMemory {
 public:
  static constexpr uint64_t kMemPoolRegion = 1;
  static constexpr uint64_t kLocalBufferRegion = 2;
  static constexpr uint64_t kMemPoolAlignment = 4096;

  struct Region {
    uint64_t id = 0;
    dummy::RegionKind kind = dummy::RegionKind::kMemPool;
    MappedFile file;
  };

  static Result<DummyMemory> Create(uint64_t mem_pool_size, uint64_t local_buffer_size);
  DummyMemory(DummyMemory&& other) noexcept;
  DummyMemory& operator=(DummyMemory&&) = delete;

  // (region, offset, len) when [ptr, ptr + len) lies inside one region; nullopt otherwise.
  std::optional<dummy::Range> Translate(const void* ptr, uint64_t len) const;
  // Like Translate, but only the mem pool: where registered buffers must come from.
  std::optional<dummy::Range> TranslateMemPool(const void* ptr, uint64_t len) const;

  StoreResult<void*> AllocFromMemPool(size_t size);

  // The local buffer's bytes [offset, offset + len) when inside it, else nullptr.
  uint8_t* LocalBuffer(uint64_t offset, uint64_t len) const;
  uint64_t local_buffer_size() const;
  uint64_t mem_pool_size() const;
  uint64_t mem_pool_used() const;

  const std::vector<Region>& regions() const { return regions_; }

 private:
  DummyMemory() = default;
  const Region* Find(uint64_t id) const;

  std::vector<Region> regions_;
  mutable std::mutex pool_mu_;
  uint64_t pool_used_ = 0;  // bump pointer into the mem pool
};

}  // namespace kvtier::store
