// MasterService, part 5: a takeover from the nodes' records (docs/store/failover.md). Each node
// reports the records of its segment; the master merges them per key, newest serial first.
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

RestoreStats MasterService::AddReported(uint64_t segment_id, const std::string& endpoint,
                                        const std::vector<ObjectRecord>& records,
                                        std::vector<ObjectRecord>* drops) {
  Impl& s = *impl_;
  RestoreStats stats;
  const uint64_t generation = s.pool.GenerationOf(segment_id);
  const int64_t now = s.Now();
  const int64_t lease_until =
      now + std::chrono::nanoseconds(s.options.default_kv_lease_ttl).count();
  auto drop = [&](const ObjectRecord& r) {
    ++stats.replicas_dropped;
    drops->push_back(RemovalOf(r));
  };
  for (const ObjectRecord& r : records) {
    if (r.kind != RecordKind::kPut || r.segment_id != segment_id || generation == 0) {
      drop(r);
      continue;
    }
    Replica replica{MountRef{segment_id, generation}, endpoint, r.offset, r.length};
    auto shard = s.shards.Lock(r.key);
    ObjectMeta* meta = shard->Find(r.key);
    if (meta != nullptr && (meta->serial > r.serial || !meta->complete)) {
      drop(r);  // a newer version (or a put of this term) has the key
      continue;
    }
    if (meta != nullptr && meta->serial == r.serial) {  // another replica of the same version
      if (s.pool.Reserve(replica)) {
        meta->replicas.push_back(std::move(replica));
        if (meta->replicas.size() >= meta->want_replicas) s.repairs.Drop(r.key);
      } else {
        drop(r);
      }
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
    if (!s.pool.Reserve(replica)) {
      drop(r);
      continue;
    }
    ObjectMeta fresh;
    fresh.size = r.size;
    fresh.complete = true;
    fresh.hard_pin = r.hard_pin;
    fresh.want_replicas = r.want_replicas;
    fresh.soft_pin_ttl_ns = r.soft_pin_ttl_ns;
    fresh.RenewSoftPin(now);
    fresh.lease_until_ns = lease_until;  // the old master's readers may still be copying
    fresh.serial = r.serial;
    fresh.replicas.push_back(std::move(replica));
    if (fresh.replicas.size() < fresh.want_replicas) s.repairs.Add(r.key);
    shard->Insert(r.key, std::move(fresh));
    ++stats.objects;
  }
  return stats;
}

}  // namespace kvtier::store
