#include "store/node/segment_records.h"

#include <gtest/gtest.h>

namespace kvtier::store {
namespace {

constexpr uint64_t kSeg = 42;

ObjectRecord Put(std::string key, uint64_t serial, uint64_t offset, uint64_t length) {
  ObjectRecord r;
  r.key = std::move(key);
  r.serial = serial;
  r.segment_id = kSeg;
  r.offset = offset;
  r.length = length;
  r.size = length;
  return r;
}

ObjectRecord Remove(std::string key, uint64_t serial, uint64_t offset) {
  ObjectRecord r = Put(std::move(key), serial, offset, 0);
  r.kind = RecordKind::kRemove;
  return r;
}

std::vector<std::string> Keys(const SegmentRecords& records) {
  std::vector<std::string> out;
  for (const ObjectRecord& r : records.Report(0, 1000).records) out.push_back(r.key);
  return out;
}

TEST(SegmentRecords, KeepsPutsAndDropsRemovedOnes) {
  SegmentRecords records;
  records.SetSegment(kSeg);
  records.Apply({Put("a", 1, 0, 100), Put("b", 2, 100, 100), Put("c", 3, 300, 50)});
  EXPECT_EQ(Keys(records), (std::vector<std::string>{"a", "b", "c"}));
  records.Apply({Remove("b", 2, 100)});
  EXPECT_EQ(Keys(records), (std::vector<std::string>{"a", "c"}));
  // A remove that names another serial or key is not the record held there.
  records.Apply({Remove("a", 9, 0), Remove("x", 1, 0), Remove("c", 3, 301)});
  EXPECT_EQ(Keys(records), (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(records.stats().ignored, 3u);
}

TEST(SegmentRecords, APutDropsEveryRecordItsRangeOverlaps) {
  SegmentRecords records;
  records.SetSegment(kSeg);
  records.Apply(
      {Put("a", 1, 0, 100), Put("b", 2, 100, 100), Put("c", 3, 200, 100), Put("d", 4, 300, 100)});
  records.Apply({Put("new", 5, 150, 100)});  // overlaps b's tail and c's head, not a or d
  EXPECT_EQ(Keys(records), (std::vector<std::string>{"a", "new", "d"}));
  EXPECT_EQ(records.stats().overlapped, 2u);
  records.Apply({Put("new", 5, 150, 100)});  // the same record again: kept, not counted
  EXPECT_EQ(records.size(), 3u);
  EXPECT_EQ(records.stats().overlapped, 2u);
}

TEST(SegmentRecords, OnlyTheServedSegmentsRecordsAreKept) {
  SegmentRecords records;
  records.Apply({Put("early", 1, 0, 10)});  // no segment yet
  records.SetSegment(kSeg);
  ObjectRecord other = Put("other", 1, 0, 10);
  other.segment_id = kSeg + 1;
  records.Apply({other, Put("a", 2, 0, 10)});
  EXPECT_EQ(Keys(records), (std::vector<std::string>{"a"}));
  records.SetSegment(kSeg + 1);  // a new segment starts empty
  EXPECT_EQ(records.size(), 0u);
}

TEST(SegmentRecords, ReportsInChunksUntilTheCursorIsZero) {
  SegmentRecords records;
  records.SetSegment(kSeg);
  std::vector<ObjectRecord> puts;
  for (uint64_t i = 0; i < 10; ++i) puts.push_back(Put("k" + std::to_string(i), i + 1, i * 64, 64));
  records.Apply(puts);
  std::vector<ObjectRecord> seen;
  uint64_t cursor = 0;
  int chunks = 0;
  do {
    RecordReport chunk = records.Report(cursor, 3);
    EXPECT_LE(chunk.records.size(), 3u);
    seen.insert(seen.end(), chunk.records.begin(), chunk.records.end());
    cursor = chunk.next_cursor;
    ++chunks;
  } while (cursor != 0);
  EXPECT_EQ(chunks, 4);
  EXPECT_EQ(seen, puts);
  EXPECT_EQ(records.Report(0, 1).end, 10u * 64);  // where the last record ends
}

}  // namespace
}  // namespace kvtier::store
