// The mounted segments and the space in them. One ArenaAllocator per segment hands out
// (offset, size) ranges; the master never touches the bytes. Each mount gets a fresh generation
// number: a replica remembers the (segment id, generation) it was allocated from, so freeing a
// replica whose segment was unmounted (and maybe mounted again under the same id) is a no-op
// instead of corrupting the new allocator. Thread-safe (one mutex; every call is short).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/arena_allocator.h"
#include "store/master/interned.h"
#include "store/protocol/store_errors.h"
#include "store/protocol/store_types.h"

namespace kvtier::store {

// Replicas are aligned to this; an object of `size` bytes costs ChargedBytes(size) of a segment.
inline constexpr uint64_t kSegmentAlignment = 64;
inline uint64_t ChargedBytes(uint64_t size) {
  return (size + kSegmentAlignment - 1) & ~(kSegmentAlignment - 1);
}

// One mount of one segment.
struct MountRef {
  uint64_t segment_id = 0;
  uint64_t generation = 0;
  bool operator==(const MountRef&) const = default;
};

// A replica as the master stores it.
struct Replica {
  MountRef mount;
  InternedString endpoint;
  uint64_t offset = 0;
  uint64_t size = 0;  // what the writer asked for; the segment is charged ChargedBytes(size)

  // What a node is told: `term` is the handing-out master's, which nodes fence by.
  ReplicaDesc Desc(uint64_t term) const {
    return ReplicaDesc{mount.segment_id, endpoint.str(), offset, size, term};
  }
};

struct SegmentSnapshot {
  uint64_t id = 0;
  std::string node_id;
  std::string endpoint;
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
};

struct PoolTotals {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t segments = 0;
  uint64_t largest_segment = 0;  // capacity of the largest segment
};

class SegmentPool {
 public:
  explicit SegmentPool(uint64_t seed = std::random_device{}());

  // OK when new or when the same node mounts the same id again with the same size.
  // SEGMENT_ALREADY_EXISTS when another node owns the id; INVALID_PARAMS for a bad size/endpoint.
  Status Mount(const std::string& node_id, const std::string& endpoint, const SegmentInfo& segment);
  // A mount its predecessor recorded, re-created by a master that takes over (master_restore.cc)
  // with the same generation, so the recorded replicas name it. Fails like Mount.
  Status Restore(const std::string& node_id, const std::string& endpoint,
                 const SegmentInfo& segment, uint64_t generation);
  // Takes a recorded replica's range again; false when its mount is not here or the range is
  // not free (two records claim it: the caller drops the replica).
  bool Reserve(const Replica& replica);
  // Generations of later mounts start here (a master under etcd passes its term, so no two
  // terms hand out the same one: a record of an unmounted segment can never match a new mount).
  void SetGenerationBase(uint64_t base);
  // The mount's generation; 0 when the segment is not mounted.
  uint64_t GenerationOf(uint64_t segment_id) const;
  // SEGMENT_NOT_FOUND when the id is not mounted, or mounted by another node.
  Result<MountRef> Unmount(const std::string& node_id, uint64_t segment_id);
  // Every segment of the node; what was unmounted.
  std::vector<MountRef> UnmountNode(const std::string& node_id);
  // The nodes other than `node_id` with a segment at `endpoint`, and those segments' ids: a node
  // that mounts at an endpoint where another node's segment is has replaced it (an endpoint is
  // one listening process, so the other one is gone).
  std::map<std::string, std::vector<uint64_t>> OthersAt(const std::string& endpoint,
                                                        const std::string& node_id) const;

  // Up to `count` replicas of `size` bytes on distinct segments, in placement order
  // (placement.h). Empty when no segment has room.
  std::vector<Replica> Allocate(uint64_t size, uint32_t count, const std::string& writer_node,
                                const std::string& preferred_endpoint);
  // One more replica of `size` bytes for re-replication, on a segment of `node_id` that holds
  // none of `existing` (and at an endpoint none of them is at); nullopt when none has room.
  std::optional<Replica> AllocateOn(const std::string& node_id, uint64_t size,
                                    const std::vector<Replica>& existing);
  // Returns the replica's range to its segment; a no-op when that mount is gone.
  void Free(const Replica& replica);
  void FreeAll(const std::vector<Replica>& replicas);

  bool IsMounted(const MountRef& mount) const;
  PoolTotals Totals() const;
  std::vector<SegmentSnapshot> Snapshot() const;

 private:
  struct Segment {
    std::string node_id;
    InternedString endpoint;  // copied into every replica
    uint64_t generation = 0;
    ArenaAllocator allocator;
  };
  void FreeLocked(const Replica& replica);

  mutable std::mutex mu_;
  std::map<uint64_t, Segment> segments_;  // by segment id
  uint64_t next_generation_ = 1;
  std::mt19937_64 rng_;
};

}  // namespace kvtier::store
