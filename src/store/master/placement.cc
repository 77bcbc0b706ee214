// Placement order and distinct-node picking (see placement.h).
#include "store/master/placement.h"

#include <unordered_set>

namespace kvtier::store {

std::vector<size_t> PlacementOrder(const std::vector<PlacementSegment>& segments,
                                   const PlacementRequest& request) {
  std::vector<size_t> order;
  order.reserve(segments.size());
  std::vector<bool> taken(segments.size(), false);
  auto take_if = [&](auto&& pred) {
    for (size_t i = 0; i < segments.size(); ++i) {
      if (!taken[i] && pred(segments[i])) {
        taken[i] = true;
        order.push_back(i);
      }
    }
  };
  if (!request.preferred_endpoint.empty()) {
    take_if([&](const PlacementSegment& s) { return s.endpoint == request.preferred_endpoint; });
  }
  if (!request.writer_node.empty()) {
    take_if([&](const PlacementSegment& s) { return s.node_id == request.writer_node; });
  }
  if (segments.empty()) return order;
  const size_t start = request.random % segments.size();
  for (size_t k = 0; k < segments.size(); ++k) {
    const size_t i = (start + k) % segments.size();
    if (!taken[i]) {
      taken[i] = true;
      order.push_back(i);
    }
  }
  return order;
}

std::vector<size_t> PickDistinct(const std::vector<PlacementSegment>& segments,
                                 const std::vector<size_t>& order, size_t count,
                                 const std::function<bool(size_t)>& fits) {
  std::vector<size_t> picked;
  if (count == 0) return picked;
  std::vector<bool> tried(segments.size(), false);
  std::unordered_set<std::string_view> nodes_used;
  // Pass 1: one segment per node. Pass 2: fill up from the segments not tried yet.
  for (size_t i : order) {
    if (picked.size() == count) return picked;
    if (nodes_used.count(segments[i].node_id) != 0) continue;
    tried[i] = true;
    if (fits(i)) {
      picked.push_back(i);
      nodes_used.insert(segments[i].node_id);
    }
  }
  for (size_t i : order) {
    if (picked.size() == count) return picked;
    if (tried[i]) continue;
    tried[i] = true;
    if (fits(i)) picked.push_back(i);
  }
  return picked;
}

}  // namespace kvtier::store
