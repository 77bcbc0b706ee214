// A dummy client's memfd regions, mem-pool allocator and pointer translation (dummy_memory.h).
#include "store/client/dummy_memory.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvtier::store {
namespace {

bool Inside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

Status Invalid(std::string message) {
  return StoreError(ErrorCode::INVALID_PARAMS, "register_shared_memory: " + std::move(message));
}

}  // namespace

Result<DummyMemory> DummyMemory::Create(uint64_t mem_pool_size, uint64_t local_buffer_size) {
  DummyMemory m;
  if (mem_pool_size > 0) {
    auto file = MappedFile::Create("kvtier-dummy-mem-pool", mem_pool_size, /*prefault=*/true,
                                   /*huge_pages=*/true);
    if (!file.ok()) return file.status();
    m.pool_data_ = file->data();
    m.pool_size_ = file->size();
    m.regions_.push_back(Region{kMemPoolRegion, dummy::RegionKind::kMemPool, file->data(),
                                file->size(), std::move(*file), {}, {}});
  }
  if (local_buffer_size > 0) {
    auto file = MappedFile::Create("kvtier-dummy-local-buffer", local_buffer_size,
                                   /*prefault=*/true, /*huge_pages=*/false);
    if (!file.ok()) return file.status();
    m.local_data_ = file->data();
    m.local_size_ = file->size();
    m.regions_.push_back(Region{kLocalBufferRegion, dummy::RegionKind::kLocalBuffer,
                                file->data(), file->size(), std::move(*file), {}, {}});
  }
  return m;
}

DummyMemory::DummyMemory(DummyMemory&& other) noexcept
    : regions_(std::move(other.regions_)),
      pool_data_(other.pool_data_),
      pool_size_(other.pool_size_),
      local_data_(other.local_data_),
      local_size_(other.local_size_),
      pool_used_(other.pool_used_) {}

std::optional<dummy::Range> DummyMemory::Translate(const void* ptr, uint64_t len) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock lock(regions_mu_);
  for (const auto& r : regions_) {
    const auto base = reinterpret_cast<uintptr_t>(r.data);
    if (p >= base && Inside(p - base, len, r.size)) return dummy::Range{r.id, p - base, len};
  }
  return std::nullopt;
}

std::optional<dummy::Range> DummyMemory::TranslateMemPool(const void* ptr, uint64_t len) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::shared_lock lock(regions_mu_);
  for (const auto& r : regions_) {
    const auto base = reinterpret_cast<uintptr_t>(r.data);
    if (p >= base && Inside(p - base, len, r.size)) {
      if (r.kind != dummy::RegionKind::kMemPool) return std::nullopt;
      return dummy::Range{r.id, p - base, len};
    }
  }
  return std::nullopt;
}

Result<DummyMemory::SharedRegion> DummyMemory::PrepareShared(void* base, uint64_t size,
                                                             int fd) const {
  if (base == nullptr || size == 0 || fd < 0) {
    return Invalid(fmt::format("needs a mapped base, a size > 0 and an fd (got {}, {}, {})", base,
                               size, fd));
  }
  const auto b = reinterpret_cast<uintptr_t>(base);
  if (b % static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE)) != 0) {
    return Invalid(fmt::format("base {} is not page-aligned: it must be where the memfd's first "
                               "byte is mapped", base));
  }
  if (size > UINTPTR_MAX - b) return Invalid(fmt::format("{} bytes at {} overflow", size, base));
  // The node checks these too, but after the fd has crossed the socket; say it here first.
  const int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    return Invalid(fmt::format("fd {} is not a memfd ({})", fd, std::strerror(errno)));
  }
  if ((seals & F_SEAL_SHRINK) == 0) {
    return Invalid(fmt::format("the memfd (fd {}) must be sealed against shrinking "
                               "(F_SEAL_SHRINK): the node maps it and a shrink would crash it",
                               fd));
  }
  struct stat st{};
  if (::fstat(fd, &st) != 0) return Invalid(fmt::format("fstat(fd {}): {}", fd, std::strerror(errno)));
  if (static_cast<uint64_t>(st.st_size) < size) {
    return Invalid(fmt::format("the memfd holds {} bytes, fewer than the {} shared", st.st_size,
                               size));
  }
  auto out = NewShared(base, size);
  if (!out.ok()) return out;
  out->fd = wire::UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0));
  if (!out->fd.valid()) return Invalid(fmt::format("dup(fd {}): {}", fd, std::strerror(errno)));
  return out;
}

Result<DummyMemory::SharedRegion> DummyMemory::PrepareGpu(void* base, uint64_t size) const {
  if (base == nullptr || size == 0) return Invalid("needs a device pointer and a size > 0");
  auto exported = cuda::ExportRange(base, size);
  if (!exported.ok()) return Invalid(fmt::format("GPU buffer: {}", exported.status().message()));
  auto out = NewShared(base, size);
  if (out.ok()) out->gpu = std::move(exported).value();
  return out;
}

Result<DummyMemory::SharedRegion> DummyMemory::NewShared(void* base, uint64_t size) const {
  const auto b = reinterpret_cast<uintptr_t>(base);
  SharedRegion out;
  out.base = static_cast<uint8_t*>(base);
  out.size = size;
  std::shared_lock lock(regions_mu_);
  if (regions_.size() >= dummy::kMaxRegionsPerDummy) {
    return Invalid(
        fmt::format("a dummy may register at most {} regions", dummy::kMaxRegionsPerDummy));
  }
  out.id = kFirstSharedRegion;
  for (const auto& r : regions_) {
    const auto rb = reinterpret_cast<uintptr_t>(r.data);
    if (b < rb + r.size && rb < b + size) {
      return Invalid(fmt::format("[{}, +{}) overlaps region {} [{}, +{}) already shared with "
                                 "the node", base, size, r.id, static_cast<void*>(r.data),
                                 r.size));
    }
    out.id = std::max(out.id, r.id + 1);
  }
  return out;
}

void DummyMemory::AddShared(SharedRegion region) {
  std::unique_lock lock(regions_mu_);
  regions_.push_back(Region{region.id, dummy::RegionKind::kMemPool, region.base, region.size, {},
                            std::move(region.fd), std::move(region.gpu)});
}

bool DummyMemory::IsShared(const void* base, uint64_t size) const {
  std::shared_lock lock(regions_mu_);
  for (const auto& r : regions_) {
    if ((r.shared.valid() || r.gpu) && r.data == base && r.size == size) return true;
  }
  return false;
}

bool DummyMemory::IsGpuRegion(const void* base) const {
  std::shared_lock lock(regions_mu_);
  for (const auto& r : regions_) {
    if (r.gpu && r.data == base) return true;
  }
  return false;
}

std::vector<DummyMemory::RegionView> DummyMemory::Regions() const {
  std::shared_lock lock(regions_mu_);
  std::vector<RegionView> out;
  out.reserve(regions_.size());
  for (const auto& r : regions_) {
    out.push_back(RegionView{r.id, r.kind, r.size, r.fd(), r.shared.valid() || r.gpu, r.gpu});
  }
  return out;
}

Result<void*> DummyMemory::AllocFromMemPool(size_t size) {
  if (pool_data_ == nullptr) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      "this dummy has no mem pool (mem_pool_size=0 at setup)");
  }
  if (size == 0) return StoreError(ErrorCode::INVALID_PARAMS, "alloc_from_mem_pool(0)");
  std::lock_guard lock(pool_mu_);
  const uint64_t capacity = pool_size_;
  // The next aligned start; sizes are not rounded, only starts are aligned.
  const uint64_t start = (pool_used_ + kMemPoolAlignment - 1) & ~(kMemPoolAlignment - 1);
  if (!Inside(start, size, capacity)) {
    return StoreError(ErrorCode::NO_AVAILABLE_HANDLE,
                      fmt::format("mem pool exhausted: {} bytes wanted, {} of {} left", size,
                                  start <= capacity ? capacity - start : 0, capacity));
  }
  pool_used_ = start + size;
  return static_cast<void*>(pool_data_ + start);
}

uint8_t* DummyMemory::LocalBuffer(uint64_t offset, uint64_t len) const {
  if (local_data_ == nullptr || !Inside(offset, len, local_size_)) return nullptr;
  return local_data_ + offset;
}

uint64_t DummyMemory::mem_pool_used() const {
  std::lock_guard lock(pool_mu_);
  return pool_used_;
}

}  // namespace kvtier::store
