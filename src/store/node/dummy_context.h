// One dummy client's state inside the node: its id, the memfd regions it handed over (mapped
// here) and its GPU regions (CUDA IPC, opened here), the buffers it registered in them, a private
// staging allocator over its local buffer, and its counters for the node's /status. Every range
// a request names is translated here, with overflow-safe bounds checks: data ranges must lie
// inside ONE registered buffer, staging ranges inside ONE live staging
// allocation. A context has its own mutex, held only while translating or (un)registering,
// never during a transfer. Regions are never unmapped while the context lives, so a pointer
// it returns stays valid as long as the caller holds the context (shared_ptr).
// DummyContextTable: the node's id -> context map (a second process claiming a live id is
// refused).
// Thread-safety: every method of DummyContext and DummyContextTable may be called concurrently
// (each has one mutex, never held during a transfer).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/arena_allocator.h"
#include "common/memfd.h"
#include "cuda/gpu_memory.h"
#include "store/node/region_mappings.h"
#include "store/protocol/dummy_protocol.h"
#include "store/protocol/store_errors.h"
#include "wire/fd_passing.h"

namespace kvtier::store {

struct ResolvedRange {
  uint8_t* data = nullptr;
  uint64_t size = 0;
  // Non-null: `data` is GPU memory of the dummy, opened here; copy through this (CUDA IPC).
  const cuda::IpcMemory* gpu = nullptr;
};

// One connected dummy, as the node's /status lists it (DummyService::Dummies).
struct DummySummary {
  std::string client_id;
  int64_t pid = 0;  // 0 when the dummy's pid namespace is not visible from the node's
  size_t regions = 0;
  uint64_t region_bytes = 0;  // the sizes of its regions (memfds and GPU memory)
  size_t buffers = 0;
  uint64_t staging_used_bytes = 0;
  uint64_t requests = 0;
  uint64_t put_bytes = 0;  // stored from its buffers
  uint64_t get_bytes = 0;  // loaded into them
  double connected_s = 0;  // since its HELLO
  double idle_s = 0;       // since its last answer (what the TTL cut-off measures)
};

class DummyContext {
 public:
  static constexpr uint64_t kStagingAlignment = 64;

  // `mappings`: the node's, so that dummies handing over the same file share one mapping;
  // a context of its own by default.
  explicit DummyContext(std::string client_id,
                        std::shared_ptr<RegionMappings> mappings = std::make_shared<RegionMappings>());
  const std::string& client_id() const { return client_id_; }

  // Maps `fd`, which must be a memfd sealed against shrinking (a shrink would turn the node's
  // accesses into SIGBUS) of at least `size` bytes. The first `size` bytes become region `id`.
  // A local_buffer region (at most one) becomes the staging area.
  Status AddRegion(uint64_t id, uint64_t size, dummy::RegionKind kind, wire::UniqueFd fd);
  // GPU memory of the dummy (CUDA IPC, same host): opens the handle and makes [0, size) of it
  // region `id`, one buffer. UNAVAILABLE where this node has no usable GPU.
  Status AddGpuRegion(uint64_t id, const cuda::IpcMemory::Export& memory);
  // A buffer lies inside one mem_pool region and overlaps no other buffer (registering the
  // same range again is OK).
  Status RegisterBuffer(uint64_t region, uint64_t offset, uint64_t size);
  Result<uint64_t> UnregisterBuffer(uint64_t region, uint64_t offset);  // -> its size

  // INVALID_PARAMS unless the whole range lies inside one registered buffer.
  Result<ResolvedRange> ResolveBuffer(const dummy::Range& range) const;
  // INVALID_PARAMS unless the range starts at a live staging allocation and fits inside it.
  Result<ResolvedRange> ResolveStaging(const dummy::Range& range) const;

  // A staging allocation in the local buffer for the node to stage through: (local-buffer
  // region, offset).
  Result<dummy::Range> AllocStaging(uint64_t size);
  Status FreeStaging(uint64_t offset);

  // Before Attach: the peer's pid (SO_PEERCRED) and the time of its HELLO on the service clock.
  void SetPeer(int64_t pid, int64_t hello_ns);
  // A request was answered at `now_ns`; `put`/`get` bytes were moved for it.
  void CountRequest(int64_t now_ns);
  void CountBytes(uint64_t put, uint64_t get);
  DummySummary Summary(int64_t now_ns) const;

 private:
  struct Region {
    std::shared_ptr<const MappedFile> file;  // shared with other dummies of the same file
    uint64_t size = 0;
    dummy::RegionKind kind = dummy::RegionKind::kMemPool;
    std::shared_ptr<const cuda::IpcMemory> gpu;  // a GPU region instead of a file
    uint8_t* data() const { return gpu ? gpu->data(0) : file->data(); }
  };
  Status CheckNewRegion(uint64_t id) const;     // caller holds mu_
  const Region* FindRegion(uint64_t id) const;  // caller holds mu_

  const std::string client_id_;
  const std::shared_ptr<RegionMappings> mappings_;
  mutable std::mutex mu_;
  std::map<uint64_t, Region> regions_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> buffers_;  // (region, offset) -> size
  std::optional<uint64_t> local_region_;
  std::optional<ArenaAllocator> staging_;
  std::map<uint64_t, uint64_t> staged_;  // live staging allocations: offset -> size

  int64_t pid_ = 0;
  int64_t hello_ns_ = 0;
  std::atomic<int64_t> last_request_ns_{0};
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> put_bytes_{0};
  std::atomic<uint64_t> get_bytes_{0};
};

class DummyContextTable {
 public:
  // `mapped_bytes`: where the node's mappings of dummies' memfds are counted (may be null).
  explicit DummyContextTable(Gauge* mapped_bytes = nullptr)
      : mappings_(std::make_shared<RegionMappings>(mapped_bytes)) {}
  // ILLEGAL_CLIENT when a context with the same id is live (another connection claims it).
  Status Attach(const std::shared_ptr<DummyContext>& context);
  // Removes the entry if it is still this very context.
  void Detach(const DummyContext& context);
  size_t size() const;
  std::shared_ptr<DummyContext> Find(const std::string& client_id) const;
  // Every attached context's summary, by client id.
  std::vector<DummySummary> Summaries(int64_t now_ns) const;
  // For new contexts: the node's memfd mappings.
  const std::shared_ptr<RegionMappings>& mappings() const { return mappings_; }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<DummyContext>> contexts_;
  const std::shared_ptr<RegionMappings> mappings_;
};

}  // namespace kvtier::store
