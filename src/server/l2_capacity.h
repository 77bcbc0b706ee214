// L2Capacity: one L2 adapter, wrapped so that the server knows what it holds and keeps it under
// the adapter's max_bytes. It forwards every call to the backend connector and watches the
// completions that pass through Drain:
//  - a stored key (new, or already there) is accounted with its size; lookup and load hits count
//    as accesses for the eviction policy (LRU or S3-FIFO, the same classes as L1);
//  - after a store completes, while the accounted bytes exceed max_bytes, the policy's victims
//    that no lookup holds locked are removed through the remove pool; those removes are the
//    wrapper's own, so their completions never reach the caller;
//  - a remove submitted by the caller (CLEAR, `kvtier bench l2`) forgets what it removed.
// Without max_bytes (and not exclusive) the wrapper only forwards: no per-key state (it would
// grow with the backend), no usage figures, and CLEAR has nothing of that adapter to remove.
// At startup the accounting is rebuilt from the backend's ListStored (fs: its directory; resp:
// SCAN), so an fs L2 stays under its capacity across restarts. A backend that cannot list (store)
// is accounted from the first store on; what an earlier run left there is the backend's own
// business (the store master's watermark).
//
// An `exclusive` adapter (this server is the only writer and remover, and the backend drops
// nothing by itself) has a complete record, so lookups never reach the backend: they are
// answered from the record inside SubmitLookup (or LookupNow), lock in the wrapper, and are
// drained without an eventfd signal (connector.h allows it; the CompletionRouter drains right
// after submitting).
// A lookup then costs no backend round trip, no connector thread and no router wake-up, so it stays
// fast while stores saturate the backend (an fs page-cache copy, a single-threaded Redis). A load
// that finds the key gone after all (someone else removed it) is a miss and drops it from the
// record.
// The accounting is of value bytes: the fs connector adds a 4 KiB header to each file.
// Thread-safety: as connector.h says; one mutex guards the accounting.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/metrics.h"
#include "connectors/connector.h"
#include "l1/eviction_policy.h"

namespace kvtier {

class L2Capacity final : public Connector {
 public:
  // INVALID_ARGUMENT for an eviction_policy other than LRU or S3FIFO.
  static Result<std::unique_ptr<L2Capacity>> Create(std::unique_ptr<Connector> inner,
                                                    MetricsRegistry& metrics);
  ~L2Capacity() override { inner_->Close(); }

  const ConnectorOptions& Options() const override { return inner_->Options(); }
  TaskId SubmitLookup(std::vector<std::string> keys) override;
  std::optional<Completion> LookupNow(std::vector<std::string> keys) override;
  void Unlock(std::span<const std::string> keys) override;
  TaskId SubmitLoad(std::vector<std::string> keys, std::vector<MutableBuffer> dst) override;
  TaskId SubmitWrite(std::vector<std::string> keys, std::vector<ConstBuffer> src) override;
  TaskId SubmitRemove(std::vector<std::string> keys) override;
  int EventFd(ConnectorOp op) const override { return inner_->EventFd(op); }
  std::vector<Completion> Drain(ConnectorOp op) override;
  ConnectorStats Stats() const override;
  bool Locked(const std::string& key) const override;
  Result<std::vector<StoredObject>> ListStored() override { return inner_->ListStored(); }
  void Close() override { inner_->Close(); }

  struct Usage {
    uint64_t bytes = 0;
    uint64_t objects = 0;
    bool accounted = false;       // max_bytes or exclusive: the figures below are kept
    uint64_t capacity_bytes = 0;  // 0: no max_bytes
    uint64_t evictions = 0;       // keys removed to make room, since start
  };
  Usage usage() const;
  // Every key accounted now (what CLEAR removes).
  std::vector<std::string> Keys() const;

 private:
  struct Pending {
    ConnectorOp op = ConnectorOp::kLookup;
    std::vector<std::string> keys;
    std::vector<uint64_t> sizes;  // stores and evictions
    bool eviction = false;
    // A caller's remove on an exclusive adapter skips locked keys: the caller's key count, and
    // where each submitted key sits among them (empty: all were submitted, in order).
    size_t caller_keys = 0;
    std::vector<size_t> positions;
  };
  // Lookups of an exclusive adapter, answered from the record.
  struct OwnLookups {
    std::vector<Completion> done;                     // not yet drained
    std::unordered_map<std::string, uint32_t> locks;  // key -> lookups holding it
    TaskId next_id = TaskId{1} << 63;                 // apart from the backend's ids
    OpCounters counters;
  };
  struct Gauges {  // null when nothing is accounted
    Gauge* bytes = nullptr;
    Gauge* objects = nullptr;
    Counter* evictions = nullptr;
  };

  L2Capacity(std::unique_ptr<Connector> inner, std::unique_ptr<EvictionPolicy> policy,
             Gauges gauges);
  void Rebuild();
  TaskId RemoveUnlocked(std::vector<std::string> keys);
  // The rest need mu_ held.
  Completion LookupFromRecord(const std::vector<std::string>& keys);
  bool LockedHeld(const std::string& key) const;
  TaskId Track(ConnectorOp op, const std::vector<std::string>& keys, std::vector<uint64_t> sizes,
               const std::function<TaskId()>& submit);
  void Apply(Pending& p, Completion& c);
  void Account(const std::string& key, uint64_t size);
  void Forget(const std::string& key);
  void EvictOverCapacity();
  void Publish();

  std::unique_ptr<Connector> inner_;
  const uint64_t capacity_;
  const bool exclusive_;
  const bool accounted_;  // capacity_ > 0 || exclusive_
  Gauges gauges_;

  mutable std::mutex mu_;
  std::unique_ptr<EvictionPolicy> policy_;  // keys carried in ObjectKey::model (L2 names)
  std::unordered_map<std::string, uint64_t> sizes_;
  uint64_t bytes_ = 0;
  uint64_t evictions_ = 0;
  std::unordered_map<TaskId, Pending> pending_;
  std::unique_ptr<OwnLookups> own_;  // exclusive adapters only
};

}  // namespace kvtier
