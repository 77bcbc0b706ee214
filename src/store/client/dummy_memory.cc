// A dummy client's memfd regions, mem-pool allocator and pointer translation (dummy_memory.h).
#include "store/client/dummy_memory.h"

#include <fmt/format.h>

namespace kvtier::store {
namespace {

bool Inside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace

Result<DummyMemory> DummyMemory::Create(uint64_t mem_pool_size, uint64_t local_buffer_size) {
  DummyMemory m;
  if (mem_pool_size > 0) {
    auto file = MappedFile::Create("kvtier-dummy-mem-pool", mem_pool_size, /*prefault=*/true,
                                   /*huge_pages=*/true);
    if (!file.ok()) return file.status();
    m.regions_.push_back(Region{kMemPoolRegion, dummy::RegionKind::kMemPool, std::move(*file)});
  }
  if (local_buffer_size > 0) {
    auto file = MappedFile::Create("kvtier-dummy-local-buffer", local_buffer_size,
                                   /*prefault=*/true, /*huge_pages=*/false);
    if (!file.ok()) return file.status();
    m.regions_.push_back(
        Region{kLocalBufferRegion, dummy::RegionKind::kLocalBuffer, std::move(*file)});
  }
  return m;
}

DummyMemory::DummyMemory(DummyMemory&& other) noexcept
    : regions_(std::move(other.regions_)), pool_used_(other.pool_used_) {}

const DummyMemory::Region* DummyMemory::Find(uint64_t id) const {
  for (const auto& r : regions_) {
    if (r.id == id) return &r;
  }
  return nullptr;
}

std::optional<dummy::Range> DummyMemory::Translate(const void* ptr, uint64_t len) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  for (const auto& r : regions_) {
    const auto base = reinterpret_cast<uintptr_t>(r.file.data());
    if (p >= base && Inside(p - base, len, r.file.size())) {
      return dummy::Range{r.id, p - base, len};
    }
  }
  return std::nullopt;
}

std::optional<dummy::Range> DummyMemory::TranslateMemPool(const void* ptr, uint64_t len) const {
  auto range = Translate(ptr, len);
  if (!range || range->region != kMemPoolRegion) return std::nullopt;
  return range;
}

StoreResult<void*> DummyMemory::AllocFromMemPool(size_t size) {
  const Region* pool = Find(kMemPoolRegion);
  if (pool == nullptr) {
    return StoreStatus(ErrorCode::INVALID_PARAMS,
                       "this dummy has no mem pool (mem_pool_size=0 at setup)");
  }
  if (size == 0) return StoreStatus(ErrorCode::INVALID_PARAMS, "alloc_from_mem_pool(0)");
  std::lock_guard lock(pool_mu_);
  const uint64_t capacity = pool->file.size();
  // The next aligned start; sizes are not rounded, only starts are aligned.
  const uint64_t start = (pool_used_ + kMemPoolAlignment - 1) & ~(kMemPoolAlignment - 1);
  if (!Inside(start, size, capacity)) {
    return StoreStatus(ErrorCode::NO_AVAILABLE_HANDLE,
                       fmt::format("mem pool exhausted: {} bytes wanted, {} of {} left", size,
                                   start <= capacity ? capacity - start : 0, capacity));
  }
  pool_used_ = start + size;
  return static_cast<void*>(pool->file.data() + start);
}

uint8_t* DummyMemory::LocalBuffer(uint64_t offset, uint64_t len) const {
  const Region* local = Find(kLocalBufferRegion);
  if (local == nullptr || !Inside(offset, len, local->file.size())) return nullptr;
  return local->file.data() + offset;
}

uint64_t DummyMemory::local_buffer_size() const {
  const Region* r = Find(kLocalBufferRegion);
  return r ? r->file.size() : 0;
}

uint64_t DummyMemory::mem_pool_size() const {
  const Region* r = Find(kMemPoolRegion);
  return r ? r->file.size() : 0;
}

uint64_t DummyMemory::mem_pool_used() const {
  std::lock_guard lock(pool_mu_);
  return pool_used_;
}

}  // namespace kvtier::store
