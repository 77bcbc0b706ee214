// One dummy's regions, buffers and staging allocations (dummy_context.h), and the id table.
#include "store/node/dummy_context.h"

#include <fmt/format.h>

#include <cstring>

namespace kvtier::store {
namespace {

Status Invalid(std::string message) {
  return StoreError(ErrorCode::INVALID_PARAMS, std::move(message));
}

// [offset, offset + length) inside [0, size), without overflow.
bool Inside(uint64_t offset, uint64_t length, uint64_t size) {
  return offset <= size && length <= size - offset;
}

}  // namespace

DummyContext::DummyContext(std::string client_id, std::shared_ptr<RegionMappings> mappings)
    : client_id_(std::move(client_id)), mappings_(std::move(mappings)) {}

const DummyContext::Region* DummyContext::FindRegion(uint64_t id) const {
  auto it = regions_.find(id);
  return it == regions_.end() ? nullptr : &it->second;
}

Status DummyContext::CheckNewRegion(uint64_t id) const {
  if (regions_.count(id) != 0) return Invalid(fmt::format("region {} is already registered", id));
  if (regions_.size() >= dummy::kMaxRegionsPerDummy) {
    return Invalid(
        fmt::format("a dummy may register at most {} regions", dummy::kMaxRegionsPerDummy));
  }
  return Status::Ok();
}

Status DummyContext::AddGpuRegion(uint64_t id, const cuda::IpcMemory::Export& memory) {
  {
    std::lock_guard lock(mu_);
    KVT_RETURN_IF_ERROR(CheckNewRegion(id));
  }
  auto opened = cuda::IpcMemory::Open({memory}, "");  // outside mu_: it takes a while
  if (!opened.ok()) {
    // No GPU (or no CUDA) on this node is Mooncake's "needs hardware we do not drive".
    const ErrorCode code = opened.status().code() == Code::kUnavailable
                               ? ErrorCode::UNAVAILABLE_IN_CURRENT_MODE
                               : ErrorCode::INVALID_PARAMS;
    return StoreError(code, fmt::format("GPU region {}: {}", id, opened.status().message()));
  }
  std::lock_guard lock(mu_);
  KVT_RETURN_IF_ERROR(CheckNewRegion(id));
  Region r;
  r.size = memory.size;
  r.gpu = std::move(opened).value();
  regions_.emplace(id, std::move(r));
  buffers_.emplace(std::make_pair(id, uint64_t{0}), memory.size);
  return Status::Ok();
}

Status DummyContext::AddRegion(uint64_t id, uint64_t size, dummy::RegionKind kind,
                               wire::UniqueFd fd) {
  std::lock_guard lock(mu_);
  KVT_RETURN_IF_ERROR(CheckNewRegion(id));
  if (kind == dummy::RegionKind::kLocalBuffer && local_region_) {
    return Invalid(fmt::format("region {}: this dummy already has a local buffer (region {})", id,
                               *local_region_));
  }
  if (Status sealed = CheckSealedAgainstShrink(fd.get()); !sealed.ok()) {
    return Invalid(fmt::format("region {}: {}", id, sealed.message()));
  }
  auto mapped = mappings_->Map(std::move(fd), size);
  if (!mapped.ok()) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("region {}: {}", id, mapped.status().message()));
  }
  if (kind == dummy::RegionKind::kLocalBuffer) {
    staging_.emplace(size, kStagingAlignment);
    local_region_ = id;
  }
  regions_.emplace(id, Region{std::move(*mapped), size, kind, nullptr});
  return Status::Ok();
}

Status DummyContext::RegisterBuffer(uint64_t region, uint64_t offset, uint64_t size) {
  std::lock_guard lock(mu_);
  const Region* r = FindRegion(region);
  if (r == nullptr) return Invalid(fmt::format("buffer in unknown region {}", region));
  if (r->kind != dummy::RegionKind::kMemPool) {
    return Invalid(fmt::format(
        "region {} is the local buffer (the node's staging area): buffers must come from "
        "alloc_from_mem_pool",
        region));
  }
  if (size == 0) return Invalid("buffer of 0 bytes");
  if (!Inside(offset, size, r->size)) {
    return Invalid(fmt::format("buffer [{}, +{}) is outside region {} of {} bytes", offset, size,
                               region, r->size));
  }
  const auto key = std::make_pair(region, offset);
  auto next = buffers_.lower_bound(key);
  if (next != buffers_.end() && next->first == key && next->second == size) {
    return Status::Ok();  // the same registration again
  }
  if (next != buffers_.end() && next->first.first == region && next->first.second - offset < size) {
    return Invalid(fmt::format("buffer [{}, +{}) overlaps the registered buffer [{}, +{})", offset,
                               size, next->first.second, next->second));
  }
  if (next != buffers_.begin()) {
    auto prev = std::prev(next);
    if (prev->first.first == region && offset - prev->first.second < prev->second) {
      return Invalid(fmt::format("buffer [{}, +{}) overlaps the registered buffer [{}, +{})",
                                 offset, size, prev->first.second, prev->second));
    }
  }
  if (buffers_.size() >= dummy::kMaxBuffersPerDummy) {
    return Invalid(
        fmt::format("a dummy may register at most {} buffers", dummy::kMaxBuffersPerDummy));
  }
  buffers_.emplace(key, size);
  return Status::Ok();
}

Result<uint64_t> DummyContext::UnregisterBuffer(uint64_t region, uint64_t offset) {
  std::lock_guard lock(mu_);
  auto it = buffers_.find({region, offset});
  if (it == buffers_.end()) {
    return Invalid(fmt::format("no buffer registered at region {} offset {}", region, offset));
  }
  const uint64_t size = it->second;
  buffers_.erase(it);
  return size;
}

Result<ResolvedRange> DummyContext::ResolveBuffer(const dummy::Range& range) const {
  std::lock_guard lock(mu_);
  const Region* r = FindRegion(range.region);
  if (r == nullptr) return Invalid(fmt::format("unknown region {}", range.region));
  // The buffer starting at or before the range's offset is the only one that can contain it
  // (buffers do not overlap).
  auto it = buffers_.upper_bound({range.region, range.offset});
  if (it != buffers_.begin()) {
    --it;
    const auto [region, start] = it->first;
    if (region == range.region && range.offset - start < it->second &&
        Inside(range.offset - start, range.length, it->second)) {
      return ResolvedRange{r->data() + range.offset, range.length, r->gpu.get()};
    }
  }
  return Invalid(fmt::format("range [{}, +{}) of region {} is not inside one registered buffer",
                             range.offset, range.length, range.region));
}

Result<ResolvedRange> DummyContext::ResolveStaging(const dummy::Range& range) const {
  std::lock_guard lock(mu_);
  if (!local_region_ || range.region != *local_region_) {
    return Invalid(fmt::format("region {} is not this dummy's local buffer", range.region));
  }
  auto it = staged_.find(range.offset);
  if (it == staged_.end() || range.length > it->second) {
    return Invalid(fmt::format("range [{}, +{}) is not inside a live staging allocation",
                               range.offset, range.length));
  }
  return ResolvedRange{regions_.at(*local_region_).file->data() + range.offset, range.length};
}

Result<dummy::Range> DummyContext::AllocStaging(uint64_t size) {
  std::lock_guard lock(mu_);
  if (!staging_) {
    return Invalid(
        "this dummy registered no local buffer (local_buffer_size=0): use "
        "put_from / get_into");
  }
  if (size == 0) return Invalid("staging allocation of 0 bytes");
  if (size > staging_->capacity()) {
    return StoreError(ErrorCode::BUFFER_OVERFLOW,
                      fmt::format("{} bytes do not fit this dummy's local buffer of {} bytes; "
                                  "use a larger local_buffer_size or put_from / get_into",
                                  size, staging_->capacity()));
  }
  auto offset = staging_->Allocate(size);
  if (!offset) {
    return StoreError(ErrorCode::NO_AVAILABLE_HANDLE,
                      fmt::format("local buffer full: {} bytes wanted, {} of {} free", size,
                                  staging_->free_bytes(), staging_->capacity()));
  }
  staged_.emplace(*offset, size);
  return dummy::Range{*local_region_, *offset, size};
}

Status DummyContext::FreeStaging(uint64_t offset) {
  std::lock_guard lock(mu_);
  auto it = staged_.find(offset);
  if (it == staged_.end() || !staging_) {
    return Invalid(fmt::format("no staging allocation at offset {}", offset));
  }
  staging_->Free(it->first, it->second);
  staged_.erase(it);
  return Status::Ok();
}

void DummyContext::SetPeer(int64_t pid, int64_t hello_ns) {
  pid_ = pid;
  hello_ns_ = hello_ns;
  last_request_ns_ = hello_ns;
}

void DummyContext::CountRequest(int64_t now_ns) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  last_request_ns_.store(now_ns, std::memory_order_relaxed);
}

void DummyContext::CountBytes(uint64_t put, uint64_t get) {
  put_bytes_.fetch_add(put, std::memory_order_relaxed);
  get_bytes_.fetch_add(get, std::memory_order_relaxed);
}

DummySummary DummyContext::Summary(int64_t now_ns) const {
  DummySummary s;
  s.client_id = client_id_;
  s.pid = pid_;
  s.requests = requests_.load(std::memory_order_relaxed);
  s.put_bytes = put_bytes_.load(std::memory_order_relaxed);
  s.get_bytes = get_bytes_.load(std::memory_order_relaxed);
  s.connected_s = static_cast<double>(now_ns - hello_ns_) / 1e9;
  s.idle_s = static_cast<double>(now_ns - last_request_ns_.load(std::memory_order_relaxed)) / 1e9;
  std::lock_guard lock(mu_);
  s.regions = regions_.size();
  for (const auto& [id, region] : regions_) s.region_bytes += region.size;
  s.buffers = buffers_.size();
  s.staging_used_bytes = staging_ ? staging_->used_bytes() : 0;
  return s;
}

Status DummyContextTable::Attach(const std::shared_ptr<DummyContext>& context) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = contexts_.emplace(context->client_id(), context);
  if (!inserted) {
    return StoreError(
        ErrorCode::ILLEGAL_CLIENT,
        fmt::format("client id '{}' is already connected to this node", context->client_id()));
  }
  return Status::Ok();
}

void DummyContextTable::Detach(const DummyContext& context) {
  std::lock_guard lock(mu_);
  auto it = contexts_.find(context.client_id());
  if (it != contexts_.end() && it->second.get() == &context) contexts_.erase(it);
}

size_t DummyContextTable::size() const {
  std::lock_guard lock(mu_);
  return contexts_.size();
}

std::shared_ptr<DummyContext> DummyContextTable::Find(const std::string& client_id) const {
  std::lock_guard lock(mu_);
  auto it = contexts_.find(client_id);
  return it == contexts_.end() ? nullptr : it->second;
}

std::vector<DummySummary> DummyContextTable::Summaries(int64_t now_ns) const {
  std::vector<std::shared_ptr<DummyContext>> contexts;
  {
    std::lock_guard lock(mu_);  // not held while each context takes its own lock
    for (const auto& [id, context] : contexts_) contexts.push_back(context);
  }
  std::vector<DummySummary> out;
  for (const auto& context : contexts) out.push_back(context->Summary(now_ns));
  return out;
}

}  // namespace kvtier::store
