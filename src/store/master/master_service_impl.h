// MasterService's state, shared by its two source files: master_service.cc (membership, Tick,
// status) and master_service_objects.cc (puts, gets, removes). Private to this folder.
//
// Locks: one per object shard, the segment pool's, the discarded list's, the repair queue's, the
// evictor's pass mutex and membership_mu (node liveness + mount decisions). Orders: shard ->
// discarded -> pool; shard -> repairs; membership -> pool; evictor -> shard -> pool. Membership
// and shard locks are never nested, and no lock is held across I/O (there is none here).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "store/master/discarded_replicas.h"
#include "store/master/eviction.h"
#include "store/master/master_metrics.h"
#include "store/master/master_service.h"
#include "store/master/node_liveness.h"
#include "store/master/object_shards.h"
#include "store/master/repairs.h"
#include "store/master/segment_pool.h"
#include "store/protocol/store_key.h"

namespace kvtier::store {

struct MasterService::Impl {
  Impl(MasterOptions opts, Clock* clk, MetricsRegistry* registry)
      : options(opts),
        clock(clk != nullptr ? clk : Clock::Real()),
        own_metrics(registry != nullptr ? nullptr : std::make_unique<MetricsRegistry>()),
        m(registry != nullptr ? registry : own_metrics.get()) {}

  int64_t Now() const { return clock->NowNs(); }

  // One key of PutStart: under the key's shard lock, refuses a live key, preempts a stale
  // unfinished put, allocates and records the object (with config's preferred segment and pins).
  Result<std::vector<ReplicaDesc>> TryPutStart(const std::string& node_id, const std::string& key,
                                               uint64_t size, uint32_t replicas,
                                               const PutConfig& config, int64_t now);
  // Drops every replica on these (now unmounted) mounts; erases objects left with none and
  // queues those left with fewer than they want for re-replication.
  void DropMounts(const std::vector<MountRef>& gone);
  // Tick step: frees unfinished puts older than put_start_release_timeout.
  void ReleaseAbandonedPuts(int64_t now);
  // Tick step: ends the pending repairs whose copier's segment is gone, or that ran past
  // put_start_release_timeout (a copier that stalled may still write into the target until
  // then, as a writer may into an abandoned put's space); their objects wait for another copy.
  void ExpireRepairs(int64_t now);
  // A removed object's space: freed now, or, while a (forced-over) read lease is live, when it
  // ends, because the reader may still be copying the bytes. Counts the remove.
  void FreeRemoved(ObjectMeta& meta, int64_t now, MetadataJournal::Ticket removal = 0);
  // Removes the complete objects `match` accepts (leased ones only with `force`); the matches
  // left (unfinished or leased) are added to `*kept` when given.
  uint64_t RemoveMatching(const std::function<bool(const std::string&)>& match, bool force,
                          uint64_t* kept = nullptr);
  void RefreshGauges();

  // Journaling (master_journaling.cc); each a no-op (ticket 0) without a journal. Called under
  // the key's shard lock, so a key's records keep its order.
  MetadataJournal::Ticket RecordObject(const std::string& key, const ObjectMeta& meta);
  // `was`: the removed object (its replicas' nodes are told); null when none is left.
  MetadataJournal::Ticket RecordRemoval(const std::string& key, const ObjectMeta* was = nullptr);
  void RecordMount(const NodeInfo& node, const SegmentInfo& segment, const std::string& endpoint);
  void RecordUnmounts(const std::vector<MountRef>& gone);
  // Frees a removed object's replicas once its removal is recorded (metadata_journal.h).
  void FreeAfterRecorded(std::vector<Replica> replicas, MetadataJournal::Ticket ticket);
  // OK, or why the changes up to `ticket` may not survive a failover.
  Status WaitRecorded(MetadataJournal::Ticket ticket);

  const MasterOptions options;
  Clock* const clock;
  std::unique_ptr<MetricsRegistry> own_metrics;  // when the caller passed none
  MasterMetrics m;

  ObjectShards shards;
  SegmentPool pool;
  DiscardedReplicas discarded;
  RepairQueue repairs;
  Evictor evictor{&shards, &pool, options.allow_evict_soft_pinned_objects};
  std::atomic<uint64_t> next_serial{1};
  MetadataJournal* journal = nullptr;  // set before serving (SetJournal), then constant
  // The etcd term this master leads in (0 without etcd); set by Restore before serving, then
  // constant. Every descriptor it hands out carries it, and pings tell nodes (node fencing).
  uint64_t term = 0;

  mutable std::mutex membership_mu;
  NodeLiveness nodes;  // guarded by membership_mu
};

// The batch-size check shared by the batch operations (keys: store/protocol/store_key.h).
Status CheckBatch(size_t keys);

// An object a takeover restores from a record (a node's ObjectRecord, or a JournalObject an
// earlier release left in etcd): complete, its soft pin running from `now`, read-leased until
// `lease_until` because the old master's readers may still be copying. No replicas yet.
template <typename Record>
ObjectMeta RestoredObject(const Record& r, int64_t now, int64_t lease_until) {
  ObjectMeta meta;
  meta.size = r.size;
  meta.complete = true;
  meta.hard_pin = r.hard_pin;
  meta.want_replicas = r.want_replicas;
  meta.soft_pin_ttl_ns = r.soft_pin_ttl_ns;
  meta.RenewSoftPin(now);
  meta.lease_until_ns = lease_until;
  meta.serial = r.serial;
  return meta;
}

}  // namespace kvtier::store
