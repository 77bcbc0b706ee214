// What a node knows about the objects on its segment (docs/store/failover.md, "the objects'
// records on the nodes"): one record per replica, kept by the master's PUT and REMOVE records and
// reported to a master that takes over. The node's memory is where they belong: they die with the
// segment's bytes and live as long as those do.
//
// Records are kept by offset, and their ranges never overlap: a PUT drops every record whose
// range it overlaps (the master handed that space out again, so the older object is gone there).
// Only records of the segment set by SetSegment are kept; one of another segment (a predecessor's
// descriptor, a segment this node no longer serves) is ignored, and a new segment starts empty.
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "store/protocol/object_records.h"

namespace kvtier::store {

struct SegmentRecordsStats {
  uint64_t applied = 0;     // PUT and REMOVE records applied
  uint64_t ignored = 0;     // of another segment, or a REMOVE of a record not held
  uint64_t overlapped = 0;  // records dropped because a newer PUT overlapped them
};

class SegmentRecords {
 public:
  // The segment now served; a change of id drops every record.
  void SetSegment(uint64_t segment_id);
  // Applies `changes` in order.
  void Apply(const std::vector<ObjectRecord>& changes);
  // Up to `max_records` records from offset `cursor` on, in offset order; next_cursor continues
  // after them (0 when none are left). Records changed between two chunks are reported as they are
  // when their chunk is taken.
  RecordReport Report(uint64_t cursor, size_t max_records) const;

  size_t size() const;
  SegmentRecordsStats stats() const;

 private:
  void Put(const ObjectRecord& record);
  void Remove(const ObjectRecord& record);

  mutable std::mutex mu_;
  uint64_t segment_id_ = 0;
  std::map<uint64_t, ObjectRecord> by_offset_;
  SegmentRecordsStats stats_;
};

}  // namespace kvtier::store
