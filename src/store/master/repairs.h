// Re-replication bookkeeping: which complete objects have fewer replicas than their put asked
// for (a node holding one died, or the put found too few nodes), and which of them a node is
// copying now. Each pending repair owns space in the copying node's segment that readers do not
// see until the copy is reported done (MasterService::EndRepairs). Keys are hints: the caller
// checks each against its object under the shard lock, and drops the ones that are fine or gone.
// Thread-safe (one mutex, never held while taking another lock: shard -> repairs).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "store/master/segment_pool.h"

namespace kvtier::store {

struct PendingRepair {
  std::string node_id;  // the node copying
  uint64_t serial = 0;  // of the object when the copy began (ObjectMeta::serial)
  Replica target;       // allocated in that node's segment
  int64_t started_ns = 0;
};

class RepairQueue {
 public:
  void Add(const std::string& key);   // below its replica count
  void Drop(const std::string& key);  // fine again, or gone
  // Up to `limit` keys below their count and not being copied, starting after the last key
  // handed out, so a key no node can take does not hide the ones behind it.
  std::vector<std::string> Candidates(size_t limit);

  // False when a repair of `key` is already pending.
  bool Start(const std::string& key, PendingRepair repair);
  // The pending repair of `key` by `node_id`, removed; nullopt when there is none.
  std::optional<PendingRepair> Finish(const std::string& key, const std::string& node_id);
  // A copy of the pending repairs (Tick checks them for copiers gone or stuck, then Finish-es
  // those, which may have been finished meanwhile).
  std::vector<std::pair<std::string, PendingRepair>> Pending() const;

  size_t waiting() const;  // below their count, not being copied
  size_t pending() const;

 private:
  mutable std::mutex mu_;
  std::set<std::string> waiting_;
  std::map<std::string, PendingRepair> pending_;
  std::string cursor_;  // Candidates resumes after this key
};

}  // namespace kvtier::store
