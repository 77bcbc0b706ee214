// Replica placement: the order in which the segment pool tries segments for a new object.
// The segment mounted at the caller's `preferred_segment` endpoint comes first, then the writer
// node's own segments (local first: the writer reads its own bytes without a network hop), then
// every other segment starting at a random one, so puts spread over the cluster. The pool walks
// this order twice: first taking at most one segment per node (replicas on distinct nodes
// survive a node's loss), then any segment not yet used (distinct segments). Pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace kvtier::store {

struct PlacementSegment {
  std::string_view node_id;
  std::string_view endpoint;
};

struct PlacementRequest {
  std::string_view writer_node;         // the node that started the put
  std::string_view preferred_endpoint;  // PutConfig::preferred_segment; empty: none
  uint64_t random = 0;                  // where the rotation of the remaining segments starts
};

// Indices into `segments`, every index exactly once, in the order to try.
std::vector<size_t> PlacementOrder(const std::vector<PlacementSegment>& segments,
                                   const PlacementRequest& request);

// Picks up to `count` indices from `order` for which `fits(index)` is true: first at most one
// per node, then any remaining. `fits` is called at most once per index and may allocate.
std::vector<size_t> PickDistinct(const std::vector<PlacementSegment>& segments,
                                 const std::vector<size_t>& order, size_t count,
                                 const std::function<bool(size_t)>& fits);

}  // namespace kvtier::store
