#include "store/protocol/object_records.h"

#include <gtest/gtest.h>

namespace kvtier::store {
namespace {

ObjectRecord Sample(std::string key, uint64_t offset) {
  ObjectRecord r;
  r.key = std::move(key);
  r.serial = (7ull << 32) + 3;
  r.segment_id = 0xabcdef;
  r.offset = offset;
  r.length = 4096;
  r.size = 4000;
  r.want_replicas = 2;
  r.hard_pin = true;
  r.soft_pin_ttl_ns = -5;  // any value survives the trip, even one a master would not send
  return r;
}

TEST(ObjectRecords, BatchRoundTrips) {
  std::vector<ObjectRecord> in = {Sample("a", 0), Sample(std::string(4096, 'k'), 1 << 20)};
  in[1].kind = RecordKind::kRemove;
  in[1].hard_pin = false;
  const std::string bytes = EncodeRecordBatch(in);
  EXPECT_EQ(bytes.size(), 4 + EncodedRecordBytes(in[0]) + EncodedRecordBytes(in[1]));
  auto out = DecodeRecordBatch(bytes);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, in);
  auto empty = DecodeRecordBatch(EncodeRecordBatch({}));
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST(ObjectRecords, ReportCarriesItsCursor) {
  RecordReport in{{Sample("x", 64)}, 65, 64 + 4096};
  auto out = DecodeRecordReport(EncodeRecordReport(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->records, in.records);
  EXPECT_EQ(out->next_cursor, 65u);
  EXPECT_EQ(out->end, 64u + 4096);
  EXPECT_FALSE(DecodeRecordReport(EncodeRecordBatch(in.records)).ok());  // no cursor
}

TEST(ObjectRecords, RefusesEveryTruncationAndBadField) {
  const std::string bytes = EncodeRecordBatch({Sample("key", 0), Sample("other", 8192)});
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_FALSE(DecodeRecordBatch(bytes.substr(0, n)).ok()) << "prefix of " << n << " bytes";
  }
  EXPECT_FALSE(DecodeRecordBatch(bytes + "x").ok());
  std::string bad_kind = bytes;
  bad_kind[4] = 3;
  EXPECT_FALSE(DecodeRecordBatch(bad_kind).ok());
  std::string no_key = EncodeRecordBatch({Sample("k", 0)});
  no_key[5] = 0;  // key length 0
  EXPECT_FALSE(DecodeRecordBatch(no_key).ok());
  std::string huge_count = bytes;
  huge_count[3] = 0x7f;
  EXPECT_EQ(DecodeRecordBatch(huge_count).status().code(), Code::kProtocolError);
}

}  // namespace
}  // namespace kvtier::store
