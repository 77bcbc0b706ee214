// The master: composes the metadata shards, the segment allocator and placement, leases,
// eviction and node liveness (each its own unit in this folder) into MasterApi. It holds no
// bytes, only who has which key where. Thread-safe; the RPC server calls it from its thread(s),
// a monitor thread calls Tick().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/metrics.h"
#include "store/master/metadata_journal.h"
#include "store/master/segment_pool.h"
#include "store/protocol/master_api.h"
#include "store/protocol/object_records.h"

namespace kvtier::store {

struct MasterOptions {
  double eviction_high_watermark_ratio = 0.95;  // evict when used bytes exceed this share
  double eviction_ratio = 0.05;                 // ... down to (watermark - ratio) of capacity
  std::chrono::milliseconds node_ttl{10000};    // a node silent this long is unmounted
  std::chrono::milliseconds default_kv_lease_ttl{5000};
  // A soft pin's TTL when the put names none (Mooncake's default: 30 min); puts may ask for up to
  // max_kv_soft_pin_ttl.
  std::chrono::milliseconds default_kv_soft_pin_ttl{30 * 60 * 1000};
  std::chrono::milliseconds max_kv_soft_pin_ttl{24 * 60 * 60 * 1000};
  bool allow_evict_soft_pinned_objects = true;  // false: a live soft pin is never evicted
  std::chrono::milliseconds put_start_discard_timeout{30000};   // another put may take the key
  std::chrono::milliseconds put_start_release_timeout{600000};  // the space is freed
  uint32_t replicas = 1;
};

// What Restore made of a predecessor's records.
struct RestoreStats {
  uint64_t segments = 0;
  uint64_t objects = 0;
  uint64_t objects_dropped = 0;   // no replica left on a recorded mount
  uint64_t replicas_dropped = 0;  // on a mount not recorded, or over another replica's range
};

class MasterService final : public MasterApi {
 public:
  MasterService(MasterOptions options, Clock* clock, MetricsRegistry* metrics);
  ~MasterService() override;

  Status MountSegment(const NodeInfo& node, const SegmentInfo& segment) override;
  Status UnmountSegment(const std::string& node_id, uint64_t segment_id) override;
  Result<PingReply> Ping(const NodeInfo& node) override;
  std::vector<Result<std::vector<ReplicaDesc>>> PutStart(const std::string& node_id,
                                                         const std::vector<std::string>& keys,
                                                         const std::vector<uint64_t>& sizes,
                                                         const PutConfig& config) override;
  std::vector<Status> PutEnd(const std::string& node_id,
                             const std::vector<std::string>& keys) override;
  std::vector<Status> PutRevoke(const std::string& node_id,
                                const std::vector<std::string>& keys) override;
  std::vector<Result<ObjectDesc>> GetReplicas(const std::vector<std::string>& keys) override;
  std::vector<Result<bool>> Exist(const std::vector<std::string>& keys) override;
  std::vector<Status> Remove(const std::vector<std::string>& keys, bool force = false) override;
  Result<uint64_t> RemoveAll(bool force = false) override;
  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force = false) override;
  Result<std::vector<RepairTask>> TakeRepairs(const std::string& node_id,
                                              uint64_t max_bytes) override;
  std::vector<Status> EndRepairs(const std::string& node_id, const std::vector<std::string>& keys,
                                 const std::vector<bool>& copied) override;
  // RemoveAll of the keys that start with `prefix` (the operators' remove, master_admin_api.h);
  // the keys under it that were left (unfinished, or leased without `force`) go to `*kept`.
  uint64_t RemoveByPrefix(const std::string& prefix, bool force = false, uint64_t* kept = nullptr);

  // A master under etcd (docs/store/failover.md), before it serves: Restore takes over its
  // predecessor's recorded segments and objects (generation_base: where this term's mount
  // generations start, above every earlier term's); SetJournal makes every later change be
  // recorded in `journal` (which must outlive the service), and puts end only once recorded.
  RestoreStats Restore(const JournalState& state, uint64_t generation_base);
  // A takeover from the nodes (docs/store/failover.md), while serving. HoldSegment takes a
  // restored segment's whole range, so nothing is placed there before its node has reported;
  // AddReported adopts the reported records' ranges inside it (per key the largest serial wins
  // and its replicas are merged; the records that lose, or name a segment not restored, are
  // appended to `*drops` as REMOVEs to send back, and their ranges freed); ReleaseRange frees the
  // space between records as the report proceeds. Records of this master's own term are its own
  // puts, already known, and are skipped. Reports of several nodes may come at once.
  bool HoldSegment(uint64_t segment_id, uint64_t size);
  void ReleaseRange(uint64_t segment_id, uint64_t offset, uint64_t length);
  RestoreStats AddReported(uint64_t segment_id, const std::string& endpoint,
                           const std::vector<ObjectRecord>& records,
                           std::vector<ObjectRecord>* drops);
  void SetJournal(MetadataJournal* journal);

  // Housekeeping, every ~100 ms from the monitor thread (tests call it with a FakeClock):
  // unmount nodes silent for node_ttl, reclaim abandoned puts, evict above the watermark.
  void Tick();

  // /status: capacity and use per segment, keys, nodes alive, counters.
  nlohmann::json StatusJson() const;

  // Operators' reads (the master's HTTP API, master_http_api.h): they grant no lease and count
  // no get. Up to `limit` complete keys, in no particular order.
  std::vector<std::string> CompleteKeys(size_t limit) const;
  // A complete object's size and replicas (lease_ttl_ms 0); OBJECT_NOT_FOUND otherwise.
  Result<ObjectDesc> Describe(const std::string& key) const;
  std::vector<SegmentSnapshot> Segments() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store
