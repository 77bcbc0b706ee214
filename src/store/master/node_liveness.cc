// Node last-seen tracking and expiry (see node_liveness.h).
#include "store/master/node_liveness.h"

namespace kvtier::store {

void NodeLiveness::Register(const NodeInfo& node, int64_t now_ns) {
  NodeRecord& rec = nodes_[node.id];
  rec.endpoint = node.endpoint;
  rec.last_seen_ns = now_ns;
}

bool NodeLiveness::Touch(const std::string& node_id, int64_t now_ns) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return false;
  it->second.last_seen_ns = now_ns;
  return true;
}

std::vector<std::string> NodeLiveness::TakeExpired(int64_t now_ns, std::chrono::nanoseconds ttl) {
  std::vector<std::string> expired;
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    if (it->second.last_seen_ns + static_cast<int64_t>(ttl.count()) < now_ns) {
      expired.push_back(it->first);
      it = nodes_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

}  // namespace kvtier::store
