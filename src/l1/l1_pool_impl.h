// The L1Pool implementation: composes the arena mapping, the offset allocator, the object table
// and an eviction policy under one mutex. Internal to src/l1; callers use L1Pool::Create.
// Thread-safety: every public method may be called concurrently: the table, allocator and policy
// are touched only under mu_ (callers copy bytes outside it); the arena accessors read constants.
#pragma once

#include <memory>
#include <mutex>

#include "common/memfd.h"
#include "common/arena_allocator.h"
#include "l1/eviction_policy.h"
#include "l1/l1_pool.h"
#include "l1/object_table.h"

namespace kvtier {

class L1PoolImpl final : public L1Pool {
 public:
  // `options` must already be valid (L1Pool::Create checks them).
  L1PoolImpl(const L1Options& options, MappedFile arena, std::unique_ptr<EvictionPolicy> policy);

  Result<std::vector<WriteSlot>> ReserveWrite(std::span<const ObjectKey> keys,
                                              uint64_t object_size) override;
  void FinishWrite(std::span<const ObjectKey> keys, uint32_t pin_count) override;
  void AbortWrite(std::span<const ObjectKey> keys) override;
  std::vector<ReadPin> Pin(std::span<const ObjectKey> keys, uint32_t count) override;
  void Unpin(std::span<const ObjectKey> keys, uint32_t count) override;
  size_t CountPrefix(std::span<const ObjectKey> keys) const override;
  bool Contains(const ObjectKey& key) const override;
  void Touch(std::span<const ObjectKey> keys) override;
  size_t Clear(std::string_view key_prefix) override;
  size_t Erase(std::span<const ObjectKey> keys) override;
  size_t EvictIfNeeded() override;
  L1Stats Stats() const override;
  uint8_t* ArenaBase() const override { return arena_.data(); }
  int ArenaFd() const override { return arena_.fd(); }
  uint64_t ArenaSize() const override { return arena_.size(); }

 private:
  // Metric handles; all null when the options carry no registry.
  struct Metrics {
    Gauge* used_bytes = nullptr;
    Gauge* capacity_bytes = nullptr;
    Gauge* objects = nullptr;
    Counter* evictions = nullptr;
    Counter* evicted_bytes = nullptr;
    Counter* alloc_failures = nullptr;
  };

  // Everything below runs with mu_ held.
  void FreeObject(const ObjectKey& key);
  size_t ReclaimExpiredStaging(int64_t now_ns);
  // Evicts unpinned resident objects in policy order until at least `bytes` are planned to be
  // freed or the candidates run out. Returns the number of objects evicted.
  size_t EvictBytes(uint64_t bytes, int64_t now_ns);
  // Watermark eviction: from trigger down to target.
  size_t EvictToTarget(int64_t now_ns);
  void UpdateGauges();

  const L1Options options_;
  Clock* const clock_;
  MappedFile arena_;
  const std::unique_ptr<EvictionPolicy> policy_;
  const int64_t read_ttl_ns_;
  const int64_t write_ttl_ns_;
  Metrics metrics_;

  mutable std::mutex mu_;
  ArenaAllocator allocator_;
  const uint64_t trigger_bytes_;
  const uint64_t target_bytes_;
  ObjectTable table_;
  uint64_t evictions_ = 0;
  uint64_t evicted_bytes_ = 0;
  uint64_t alloc_failures_ = 0;
};

}  // namespace kvtier
