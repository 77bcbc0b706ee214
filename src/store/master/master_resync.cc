// MasterService, part 5: a takeover from the nodes' records (docs/store/failover.md). Each node
// reports the records of its segment in offset order; the segment is held whole until then, and
// the master adopts the records' ranges, merges them per key (newest serial first) and frees the
// space between them as the report proceeds (node_resync.cc), so puts are placed meanwhile.
#include <chrono>

#include "store/master/master_service.h"
#include "store/master/master_service_impl.h"

namespace kvtier::store {
namespace {

ObjectRecord RemovalOf(const ObjectRecord& r) {
  ObjectRecord out = r;
  out.kind = RecordKind::kRemove;
  return out;
}

}  // namespace

bool MasterService::HoldSegment(uint64_t segment_id, uint64_t size) {
  Impl& s = *impl_;
  const uint64_t generation = s.pool.GenerationOf(segment_id);
  if (generation == 0) return false;
  const uint64_t whole = size & ~(kSegmentAlignment - 1);
  return whole == 0 || s.pool.Reserve(Replica{MountRef{segment_id, generation}, "", 0, whole});
}

void MasterService::ReleaseRange(uint64_t segment_id, uint64_t offset, uint64_t length) {
  Impl& s = *impl_;
  const uint64_t generation = s.pool.GenerationOf(segment_id);
  if (generation == 0 || length == 0) return;
  s.pool.Free(Replica{MountRef{segment_id, generation}, "", offset, length});
}

RestoreStats MasterService::AddReported(uint64_t segment_id, const std::string& endpoint,
                                        const std::vector<ObjectRecord>& records,
                                        std::vector<ObjectRecord>* drops) {
  Impl& s = *impl_;
  RestoreStats stats;
  const uint64_t generation = s.pool.GenerationOf(segment_id);
  const uint64_t own_term_serials = s.term << 32;
  const int64_t now = s.Now();
  const int64_t lease_until =
      now + std::chrono::nanoseconds(s.options.default_kv_lease_ttl).count();
  for (const ObjectRecord& r : records) {
    if (s.term != 0 && r.serial > own_term_serials) continue;  // this master's own put
    if (r.kind != RecordKind::kPut || r.segment_id != segment_id || generation == 0) {
      ++stats.replicas_dropped;
      drops->push_back(RemovalOf(r));
      continue;
    }
    Replica replica{MountRef{segment_id, generation}, endpoint, r.offset, r.length};
    auto shard = s.shards.Lock(r.key);
    ObjectMeta* meta = shard->Find(r.key);
    if (meta != nullptr && (meta->serial > r.serial || !meta->complete)) {
      // A newer version (or a put of this term) has the key: this one's space is free.
      ++stats.replicas_dropped;
      drops->push_back(RemovalOf(r));
      s.pool.Free(replica);
      continue;
    }
    if (meta != nullptr && meta->serial == r.serial) {  // another replica of the same version
      bool known = false;
      for (const Replica& have : meta->replicas) known |= have.mount == replica.mount;
      if (!known) meta->replicas.push_back(std::move(replica));
      if (meta->replicas.size() >= meta->want_replicas) s.repairs.Drop(r.key);
      continue;
    }
    if (meta != nullptr) {  // an older version: its replicas go, and their nodes drop them
      for (const Replica& old : meta->replicas) {
        ObjectRecord gone;
        gone.kind = RecordKind::kRemove;
        gone.key = r.key;
        gone.serial = meta->serial;
        gone.segment_id = old.mount.segment_id;
        gone.offset = old.offset;
        drops->push_back(gone);
        s.pool.Free(old);
      }
      shard->Erase(r.key);
      ++stats.objects_dropped;
    }
    ObjectMeta fresh = RestoredObject(r, now, lease_until);
    fresh.replicas.push_back(std::move(replica));
    if (fresh.replicas.size() < fresh.want_replicas) s.repairs.Add(r.key);
    shard->Insert(r.key, std::move(fresh));
    ++stats.objects;
  }
  return stats;
}

}  // namespace kvtier::store
