// MasterService, part 4: a master under etcd (docs/store/failover.md). Restore takes over the
// segments (and an earlier version's object records) from etcd; the nodes' records come after,
// through AddReported (master_resync.cc). The Record* helpers send every later change to
// the journal (metadata_journal.h), called by the other parts under the key's shard lock.
#include <fmt/format.h>

#include <map>

#include "common/logging.h"
#include "store/master/journal_records.h"
#include "store/master/master_service.h"
#include "store/master/master_service_impl.h"

namespace kvtier::store {

void MasterService::SetJournal(MetadataJournal* journal) {
  Impl& s = *impl_;
  s.journal = journal;
  s.evictor.SetRelease([&s](const std::string& key, ObjectMeta& meta) {
    const MetadataJournal::Ticket removal = s.RecordRemoval(key, &meta);
    s.FreeAfterRecorded(std::move(meta.replicas), removal);
  });
}

RestoreStats MasterService::Restore(const JournalState& state, uint64_t generation_base) {
  Impl& s = *impl_;
  RestoreStats stats;
  const int64_t now = s.Now();
  s.pool.SetGenerationBase(generation_base);
  // The base is term << 32 (master_server.cc). Serials of this term start there too, above every
  // earlier term's, so the nodes' records of one key order by serial (docs/store/failover.md).
  s.term = generation_base >> 32;
  if (s.next_serial.load() < generation_base + 1) s.next_serial.store(generation_base + 1);
  std::map<uint64_t, std::string> endpoints;  // restored segment id -> its endpoint
  {
    std::lock_guard lock(s.membership_mu);
    for (const JournalSegment& seg : state.segments) {
      Status st = s.pool.Restore(seg.node_id, seg.endpoint,
                                 SegmentInfo{seg.id, seg.size, seg.endpoint}, seg.generation);
      if (!st.ok()) {
        KVT_LOG_WARN("master: recorded segment {} of node {} not restored: {}", seg.id, seg.node_id,
                     st.ToString());
        continue;
      }
      // Its node is taken as alive from now: its next ping is answered without NEED_REMOUNT, or
      // it expires after node_ttl as any silent node does.
      s.nodes.Register(NodeInfo{seg.node_id, seg.node_endpoint}, now);
      endpoints[seg.id] = seg.endpoint;
      ++stats.segments;
    }
    s.m.nodes_alive->Set(static_cast<double>(s.nodes.size()));
  }
  const int64_t lease_until =
      now + std::chrono::nanoseconds(s.options.default_kv_lease_ttl).count();
  for (const auto& [key, rec] : state.objects) {
    ObjectMeta meta = RestoredObject(rec, now, lease_until);
    if (meta.serial == 0) meta.serial = s.next_serial.fetch_add(1);  // a record without one
    for (const JournalReplica& r : rec.replicas) {
      auto seg = endpoints.find(r.segment_id);
      Replica replica{MountRef{r.segment_id, r.generation},
                      seg == endpoints.end() ? "" : seg->second, r.offset, r.size};
      if (seg != endpoints.end() && s.pool.Reserve(replica)) {
        meta.replicas.push_back(std::move(replica));
      } else {
        ++stats.replicas_dropped;
      }
    }
    auto shard = s.shards.Lock(key);
    if (meta.replicas.empty() || shard->Find(key) != nullptr) {
      ++stats.objects_dropped;
      if (shard->Find(key) == nullptr) s.RecordRemoval(key);
      continue;
    }
    // Every restored object is recorded again: an etcd record of an earlier version (one object
    // per key in etcd) reaches its nodes this way.
    s.RecordObject(key, meta);
    if (meta.replicas.size() < meta.want_replicas) s.repairs.Add(key);
    shard->Insert(key, std::move(meta));
    ++stats.objects;
  }
  s.RefreshGauges();
  KVT_LOG_INFO(
      "master: restored {} segment(s) and {} object(s) from the journal ({} object(s) "
      "and {} replica(s) dropped: their segment is gone)",
      stats.segments, stats.objects, stats.objects_dropped, stats.replicas_dropped);
  return stats;
}

MetadataJournal::Ticket MasterService::Impl::RecordObject(const std::string& key,
                                                          const ObjectMeta& meta) {
  return journal == nullptr ? 0 : journal->PutObject(key, ToJournal(meta));
}

MetadataJournal::Ticket MasterService::Impl::RecordRemoval(const std::string& key,
                                                           const ObjectMeta* was) {
  if (journal == nullptr) return 0;
  return journal->RemoveObject(key, was != nullptr ? ToJournal(*was) : JournalObject{});
}

void MasterService::Impl::RecordMount(const NodeInfo& node, const SegmentInfo& segment,
                                      const std::string& endpoint) {
  if (journal == nullptr) return;
  journal->PutSegment(JournalSegment{segment.id, pool.GenerationOf(segment.id), segment.size,
                                     endpoint, node.id, node.endpoint});
}

void MasterService::Impl::RecordUnmounts(const std::vector<MountRef>& gone) {
  if (journal == nullptr) return;
  for (const MountRef& m : gone) journal->RemoveSegment(m.segment_id);
}

void MasterService::Impl::FreeAfterRecorded(std::vector<Replica> replicas,
                                            MetadataJournal::Ticket ticket) {
  if (journal == nullptr || ticket == 0) {
    pool.FreeAll(replicas);
    return;
  }
  journal->AfterRecorded(ticket, [this, r = std::move(replicas)] { pool.FreeAll(r); });
}

Status MasterService::Impl::WaitRecorded(MetadataJournal::Ticket ticket) {
  if (journal == nullptr || ticket == 0) return Status::Ok();
  return journal->Wait(ticket);
}

}  // namespace kvtier::store
