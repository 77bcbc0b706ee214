// A node's records of the objects on its segment (segment_records.h).
#include "store/node/segment_records.h"

#include <algorithm>
#include <iterator>

namespace kvtier::store {
namespace {

// The end of a record's range; a zero-length record still takes its offset.
uint64_t EndOf(const ObjectRecord& r) { return r.offset + std::max<uint64_t>(r.length, 1); }

}  // namespace

void SegmentRecords::SetSegment(uint64_t segment_id) {
  std::lock_guard lock(mu_);
  if (segment_id == segment_id_) return;
  segment_id_ = segment_id;
  by_offset_.clear();
}

void SegmentRecords::Apply(const std::vector<ObjectRecord>& changes) {
  std::lock_guard lock(mu_);
  for (const ObjectRecord& r : changes) {
    if (segment_id_ == 0 || r.segment_id != segment_id_) {
      ++stats_.ignored;
      continue;
    }
    if (r.kind == RecordKind::kPut) {
      Put(r);
    } else {
      Remove(r);
    }
  }
}

void SegmentRecords::Put(const ObjectRecord& record) {
  const uint64_t end = EndOf(record);
  auto it = by_offset_.upper_bound(record.offset);
  if (it != by_offset_.begin() && EndOf(std::prev(it)->second) > record.offset) --it;
  while (it != by_offset_.end() && it->first < end) {
    const bool same = it->second.key == record.key && it->second.serial == record.serial &&
                      it->first == record.offset;
    if (!same) ++stats_.overlapped;
    it = by_offset_.erase(it);
  }
  ObjectRecord& kept = by_offset_[record.offset];
  kept = record;
  kept.kind = RecordKind::kPut;
  ++stats_.applied;
}

void SegmentRecords::Remove(const ObjectRecord& record) {
  auto it = by_offset_.find(record.offset);
  if (it == by_offset_.end() || it->second.key != record.key ||
      (record.serial != 0 && it->second.serial != record.serial)) {
    ++stats_.ignored;
    return;
  }
  by_offset_.erase(it);
  ++stats_.applied;
}

RecordReport SegmentRecords::Report(uint64_t cursor, size_t max_records) const {
  std::lock_guard lock(mu_);
  RecordReport out;
  auto it = by_offset_.lower_bound(cursor);
  for (; it != by_offset_.end() && out.records.size() < std::max<size_t>(max_records, 1); ++it) {
    out.records.push_back(it->second);
  }
  if (it != by_offset_.end()) out.next_cursor = out.records.back().offset + 1;
  if (!by_offset_.empty()) out.end = EndOf(by_offset_.rbegin()->second);
  return out;
}

size_t SegmentRecords::size() const {
  std::lock_guard lock(mu_);
  return by_offset_.size();
}

SegmentRecordsStats SegmentRecords::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace kvtier::store
