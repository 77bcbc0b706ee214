// MasterService, part 3: re-replication. An object that lost replicas (DropMounts) or got fewer
// than asked for (PutEnd) waits in the repair queue; a node asking for work (TakeRepairs) gets
// such objects that have no replica on it yet, with space allocated in its own segment, copies
// each from a surviving replica over the data plane and reports (EndRepairs). The new replica is
// published only then, and only if the object is still the one that was copied (same serial):
// one removed, evicted or put again meanwhile gets none, and the space is freed.
#include <fmt/format.h>

#include "store/master/master_service.h"
#include "store/master/master_service_impl.h"

namespace kvtier::store {
namespace {

// Keys looked at per TakeRepairs, and tasks handed out at most: a node asks again soon.
constexpr size_t kRepairScan = 4096;
constexpr size_t kMaxRepairTasks = 256;

}  // namespace

Result<std::vector<RepairTask>> MasterService::TakeRepairs(const std::string& node_id,
                                                           uint64_t max_bytes) {
  Impl& s = *impl_;
  if (node_id.empty()) return StoreError(ErrorCode::INVALID_PARAMS, "take_repairs: no node id");
  std::vector<RepairTask> tasks;
  const std::vector<std::string> candidates = s.repairs.Candidates(kRepairScan);
  // The common poll: nothing waits. Every node polls every 200 ms, so with a thousand nodes
  // refreshing the gauges here (a walk over every segment) cost half a core.
  if (candidates.empty()) return tasks;
  uint64_t budget = max_bytes;
  const int64_t now = s.Now();
  for (const std::string& key : candidates) {
    if (tasks.size() >= kMaxRepairTasks) break;
    auto shard = s.shards.Lock(key);
    ObjectMeta* meta = shard->Find(key);
    if (meta == nullptr || !meta->complete || meta->replicas.empty() ||
        meta->replicas.size() >= meta->want_replicas) {
      s.repairs.Drop(key);
      continue;
    }
    const uint64_t charged = ChargedBytes(meta->size);
    if (!tasks.empty() && charged > budget) break;
    std::optional<Replica> target = s.pool.AllocateOn(node_id, meta->size, meta->replicas);
    if (!target) continue;  // a replica is on this node already, or it has no room
    if (!s.repairs.Start(key, {node_id, meta->serial, *target, now})) {
      s.pool.Free(*target);
      continue;
    }
    s.m.repairs_started->Inc();
    // The replica least recently handed out would be kinder to hot nodes; the first is simple.
    tasks.push_back({key, meta->replicas.front().Desc(s.term), target->Desc(s.term)});
    budget = charged >= budget ? 0 : budget - charged;
  }
  s.RefreshGauges();
  return tasks;
}

std::vector<Status> MasterService::EndRepairs(const std::string& node_id,
                                              const std::vector<std::string>& keys,
                                              const std::vector<bool>& copied) {
  Impl& s = *impl_;
  if (keys.size() != copied.size()) {
    return std::vector<Status>(
        keys.size(),
        StoreError(ErrorCode::INVALID_PARAMS,
                   fmt::format("end_repairs: {} keys but {} results", keys.size(), copied.size())));
  }
  std::vector<Status> out;
  out.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string& key = keys[i];
    auto shard = s.shards.Lock(key);
    std::optional<PendingRepair> repair = s.repairs.Finish(key, node_id);
    if (!repair) {
      out.push_back(StoreError(ErrorCode::OBJECT_NOT_FOUND,
                               fmt::format("end_repairs: no copy of key {} is pending for node {}",
                                           KeyForMessage(key), node_id)));
      continue;
    }
    ObjectMeta* meta = shard->Find(key);
    const bool same = meta != nullptr && meta->serial == repair->serial;
    if (!copied[i] || !same || !s.pool.IsMounted(repair->target.mount)) {
      s.pool.Free(repair->target);
      if (!copied[i] && same) {
        s.m.repairs_failed->Inc();
        s.repairs.Add(key);  // another try, maybe by another node
        out.push_back(Status::Ok());
      } else {
        s.m.repairs_dropped->Inc();
        out.push_back(StoreError(ErrorCode::OBJECT_NOT_FOUND,
                                 fmt::format("end_repairs: key {} changed or its target went away "
                                             "during the copy; the copy is discarded",
                                             KeyForMessage(key))));
      }
      continue;
    }
    meta->replicas.push_back(repair->target);
    s.RecordObject(key, *meta);
    s.m.repairs_done->Inc();
    s.m.repaired_bytes->Inc(static_cast<double>(meta->size));
    if (meta->replicas.size() < meta->want_replicas) s.repairs.Add(key);
    out.push_back(Status::Ok());
  }
  s.RefreshGauges();
  return out;
}

}  // namespace kvtier::store
