// Which nodes the master considers alive, and when each was last heard from (a mount or a
// ping). A node silent for longer than node_ttl is expired: the service unmounts its segments
// and forgets it, so its next ping is answered need_remount. Not thread-safe: the service
// guards it with its membership mutex, together with the segment mounts it must agree with.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "store/protocol/store_types.h"

namespace kvtier::store {

struct NodeRecord {
  std::string endpoint;
  int64_t last_seen_ns = 0;
};

class NodeLiveness {
 public:
  // Adds the node or refreshes it (endpoint and last_seen).
  void Register(const NodeInfo& node, int64_t now_ns);
  // Refreshes a known node; false when the node is unknown.
  bool Touch(const std::string& node_id, int64_t now_ns);
  bool Known(const std::string& node_id) const { return nodes_.count(node_id) != 0; }
  // Removes the node (a successor took its endpoint); false when it was unknown.
  bool Forget(const std::string& node_id) { return nodes_.erase(node_id) != 0; }
  // Removes and returns the nodes with last_seen + ttl < now.
  std::vector<std::string> TakeExpired(int64_t now_ns, std::chrono::nanoseconds ttl);

  size_t size() const { return nodes_.size(); }
  const std::map<std::string, NodeRecord>& nodes() const { return nodes_; }

 private:
  std::map<std::string, NodeRecord> nodes_;  // by node id
};

}  // namespace kvtier::store
