// Segment mounts and replica allocation (see segment_pool.h).
#include "store/master/segment_pool.h"

#include <fmt/format.h>

#include <algorithm>

#include "store/master/placement.h"

namespace kvtier::store {

SegmentPool::SegmentPool(uint64_t seed) : rng_(seed) {}

Status SegmentPool::Mount(const std::string& node_id, const std::string& endpoint,
                          const SegmentInfo& segment) {
  if (node_id.empty()) return StoreError(ErrorCode::INVALID_PARAMS, "mount: node id is empty");
  if (endpoint.empty()) {
    return StoreError(
        ErrorCode::INVALID_PARAMS,
        fmt::format("mount: segment {} has no endpoint (neither the segment's nor the node's)",
                    segment.id));
  }
  if (segment.size < kSegmentAlignment) {
    return StoreError(ErrorCode::INVALID_PARAMS,
                      fmt::format("mount: segment {} size {} is below the minimum of {} bytes",
                                  segment.id, segment.size, kSegmentAlignment));
  }
  std::lock_guard lock(mu_);
  auto it = segments_.find(segment.id);
  if (it != segments_.end()) {
    const Segment& s = it->second;
    if (s.node_id != node_id) {
      return StoreError(
          ErrorCode::SEGMENT_ALREADY_EXISTS,
          fmt::format("mount: segment {} is already mounted by node {}", segment.id, s.node_id));
    }
    const uint64_t capacity = ArenaAllocator(segment.size, kSegmentAlignment).capacity();
    if (s.allocator.capacity() != capacity || s.endpoint != endpoint) {
      return StoreError(
          ErrorCode::INVALID_PARAMS,
          fmt::format("mount: segment {} is already mounted with size {} at '{}' (now {} at "
                      "'{}'); unmount it first",
                      segment.id, s.allocator.capacity(), s.endpoint, segment.size, endpoint));
    }
    return Status::Ok();  // idempotent re-mount
  }
  segments_.emplace(segment.id, Segment{node_id, endpoint, next_generation_++,
                                        ArenaAllocator(segment.size, kSegmentAlignment)});
  return Status::Ok();
}

Status SegmentPool::Restore(const std::string& node_id, const std::string& endpoint,
                            const SegmentInfo& segment, uint64_t generation) {
  KVT_RETURN_IF_ERROR(Mount(node_id, endpoint, segment));
  std::lock_guard lock(mu_);
  segments_.at(segment.id).generation = generation;
  next_generation_ = std::max(next_generation_, generation + 1);
  return Status::Ok();
}

bool SegmentPool::Reserve(const Replica& replica) {
  std::lock_guard lock(mu_);
  auto it = segments_.find(replica.mount.segment_id);
  if (it == segments_.end() || it->second.generation != replica.mount.generation) return false;
  return it->second.allocator.AllocateAt(replica.offset, replica.size);
}

void SegmentPool::SetGenerationBase(uint64_t base) {
  std::lock_guard lock(mu_);
  next_generation_ = std::max(next_generation_, base);
}

uint64_t SegmentPool::GenerationOf(uint64_t segment_id) const {
  std::lock_guard lock(mu_);
  auto it = segments_.find(segment_id);
  return it == segments_.end() ? 0 : it->second.generation;
}

Result<MountRef> SegmentPool::Unmount(const std::string& node_id, uint64_t segment_id) {
  std::lock_guard lock(mu_);
  auto it = segments_.find(segment_id);
  if (it == segments_.end()) {
    return StoreError(ErrorCode::SEGMENT_NOT_FOUND,
                      fmt::format("unmount: segment {} is not mounted", segment_id));
  }
  if (it->second.node_id != node_id) {
    return StoreError(ErrorCode::SEGMENT_NOT_FOUND,
                      fmt::format("unmount: segment {} is mounted by node {}, not by {}",
                                  segment_id, it->second.node_id, node_id));
  }
  MountRef ref{segment_id, it->second.generation};
  segments_.erase(it);
  return ref;
}

std::vector<MountRef> SegmentPool::UnmountNode(const std::string& node_id) {
  std::vector<MountRef> gone;
  std::lock_guard lock(mu_);
  for (auto it = segments_.begin(); it != segments_.end();) {
    if (it->second.node_id == node_id) {
      gone.push_back(MountRef{it->first, it->second.generation});
      it = segments_.erase(it);
    } else {
      ++it;
    }
  }
  return gone;
}

std::map<std::string, std::vector<uint64_t>> SegmentPool::OthersAt(
    const std::string& endpoint, const std::string& node_id) const {
  std::map<std::string, std::vector<uint64_t>> out;
  std::lock_guard lock(mu_);
  for (const auto& [id, seg] : segments_) {
    if (seg.endpoint == endpoint && seg.node_id != node_id) out[seg.node_id].push_back(id);
  }
  return out;
}

std::vector<Replica> SegmentPool::Allocate(uint64_t size, uint32_t count,
                                           const std::string& writer_node,
                                           const std::string& preferred_endpoint) {
  std::vector<Replica> out;
  if (size == 0 || count == 0) return out;
  std::lock_guard lock(mu_);
  std::vector<PlacementSegment> views;
  std::vector<std::pair<const uint64_t, Segment>*> entries;
  views.reserve(segments_.size());
  entries.reserve(segments_.size());
  for (auto& entry : segments_) {
    views.push_back(PlacementSegment{entry.second.node_id, entry.second.endpoint.str()});
    entries.push_back(&entry);
  }
  const std::vector<size_t> order =
      PlacementOrder(views, PlacementRequest{writer_node, preferred_endpoint, rng_()});
  PickDistinct(views, order, count, [&](size_t i) {
    auto& [id, seg] = *entries[i];
    auto offset = seg.allocator.Allocate(size);
    if (!offset) return false;
    out.push_back(Replica{MountRef{id, seg.generation}, seg.endpoint, *offset, size});
    return true;
  });
  return out;
}

std::optional<Replica> SegmentPool::AllocateOn(const std::string& node_id, uint64_t size,
                                               const std::vector<Replica>& existing) {
  if (size == 0) return std::nullopt;
  std::lock_guard lock(mu_);
  for (auto& [id, seg] : segments_) {
    if (seg.node_id != node_id) continue;
    const bool taken = std::any_of(existing.begin(), existing.end(), [&](const Replica& r) {
      return r.mount.segment_id == id || r.endpoint == seg.endpoint;
    });
    if (taken) continue;
    if (auto offset = seg.allocator.Allocate(size)) {
      return Replica{MountRef{id, seg.generation}, seg.endpoint, *offset, size};
    }
  }
  return std::nullopt;
}

void SegmentPool::FreeLocked(const Replica& replica) {
  auto it = segments_.find(replica.mount.segment_id);
  if (it == segments_.end() || it->second.generation != replica.mount.generation) return;
  it->second.allocator.Free(replica.offset, replica.size);
}

void SegmentPool::Free(const Replica& replica) {
  std::lock_guard lock(mu_);
  FreeLocked(replica);
}

void SegmentPool::FreeAll(const std::vector<Replica>& replicas) {
  if (replicas.empty()) return;
  std::lock_guard lock(mu_);
  for (const Replica& r : replicas) FreeLocked(r);
}

bool SegmentPool::IsMounted(const MountRef& mount) const {
  std::lock_guard lock(mu_);
  auto it = segments_.find(mount.segment_id);
  return it != segments_.end() && it->second.generation == mount.generation;
}

PoolTotals SegmentPool::Totals() const {
  PoolTotals t;
  std::lock_guard lock(mu_);
  for (const auto& [id, seg] : segments_) {
    t.capacity_bytes += seg.allocator.capacity();
    t.used_bytes += seg.allocator.used_bytes();
    t.largest_segment = std::max(t.largest_segment, seg.allocator.capacity());
  }
  t.segments = segments_.size();
  return t;
}

std::vector<SegmentSnapshot> SegmentPool::Snapshot() const {
  std::vector<SegmentSnapshot> out;
  std::lock_guard lock(mu_);
  out.reserve(segments_.size());
  for (const auto& [id, seg] : segments_) {
    out.push_back(SegmentSnapshot{id, seg.node_id, seg.endpoint.str(), seg.allocator.capacity(),
                                  seg.allocator.used_bytes()});
  }
  return out;
}

}  // namespace kvtier::store
