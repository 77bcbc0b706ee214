// A takeover from the nodes' records (docs/store/failover.md): a reported segment is held whole,
// MasterService::AddReported merges what each node reports (per key the largest serial, its
// replicas together) and sends back as REMOVEs the records that lost, freeing their space, and
// ReleaseRange frees the space between records. node_resync_test drives the same through a
// node's data plane.
#include <gtest/gtest.h>

#include <set>

#include "master_service_fixture.h"

namespace kvtier::store {
namespace {

class MasterResyncTest : public MasterServiceTest {
 protected:
  static ObjectRecord Rec(const std::string& key, uint64_t serial, uint64_t segment,
                          uint64_t offset, uint64_t size = 100) {
    ObjectRecord r;
    r.key = key;
    r.serial = serial;
    r.segment_id = segment;
    r.offset = offset;
    r.length = size;
    r.size = size;
    r.want_replicas = 2;
    return r;
  }
  // Holds the segment (once), adopts the records; the space outside them stays held.
  std::vector<ObjectRecord> Report(const std::string& node, uint64_t segment,
                                   const std::vector<ObjectRecord>& records) {
    if (held_.insert(segment).second) {
      EXPECT_TRUE(master_->HoldSegment(segment, kSegment));
    }
    std::vector<ObjectRecord> drops;
    master_->AddReported(segment, Endpoint(node), records, &drops);
    return drops;
  }
  static constexpr uint64_t kSegment = 1 << 20;
  std::set<uint64_t> held_;
};

TEST_F(MasterResyncTest, ReplicasOfOneVersionOnTwoNodesMakeOneObject) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 22, 1 << 20).ok());
  EXPECT_TRUE(Report("n1", 11, {Rec("a", 5, 11, 0), Rec("b", 6, 11, 128)}).empty());
  EXPECT_TRUE(Report("n2", 22, {Rec("a", 5, 22, 4096)}).empty());
  EXPECT_EQ(Keys(), 2u);
  auto a = Get("a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->replicas.size(), 2u);
  EXPECT_EQ(a->replicas[0].offset, 0u);
  EXPECT_EQ(a->replicas[1].segment_id, 22u);
  EXPECT_EQ(a->replicas[1].offset, 4096u);
  EXPECT_EQ(Allocated(), 2 * kSegment);  // held until the gaps are released
  master_->ReleaseRange(11, 256, kSegment - 256);
  master_->ReleaseRange(22, 0, 4096);
  master_->ReleaseRange(22, 4096 + 128, kSegment - 4096 - 128);
  EXPECT_EQ(Allocated(), 3 * ChargedBytes(100));
}

TEST_F(MasterResyncTest, TheLargestSerialWinsInEitherOrder) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 22, 1 << 20).ok());
  // The newer version first: the older one, reported later, is sent back.
  EXPECT_TRUE(Report("n1", 11, {Rec("k", 9, 11, 0)}).empty());
  auto drops = Report("n2", 22, {Rec("k", 3, 22, 0)});
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].kind, RecordKind::kRemove);
  EXPECT_EQ(drops[0].serial, 3u);
  // The older version first: replaced, its replica freed and sent back.
  EXPECT_TRUE(Report("n2", 22, {Rec("j", 1, 22, 512)}).empty());
  drops = Report("n1", 11, {Rec("j", 2, 11, 512)});
  ASSERT_EQ(drops.size(), 1u);
  EXPECT_EQ(drops[0].segment_id, 22u);
  EXPECT_EQ(drops[0].serial, 1u);
  EXPECT_EQ(Get("j")->replicas.at(0).segment_id, 11u);
  EXPECT_EQ(Get("k")->replicas.at(0).segment_id, 11u);
  // The losers' ranges are free again: only the winners' and the unreported rest are held.
  EXPECT_EQ(Allocated(), 2 * kSegment - 2 * ChargedBytes(100));
}

TEST_F(MasterResyncTest, RecordsOfAnUnknownSegmentAreSentBackAndOwnTermsSkipped) {
  master_->Restore(JournalState{}, 5ull << 32);  // this master leads in term 5
  ASSERT_TRUE(Mount("n1", 11, kSegment).ok());
  // A record of this term is this master's own put (made while the report ran): skipped.
  EXPECT_TRUE(Report("n1", 11, {Rec("own", (5ull << 32) + 3, 11, 0)}).empty());
  EXPECT_FALSE(Exists("own"));
  EXPECT_FALSE(master_->HoldSegment(99, kSegment));  // never mounted here
  std::vector<ObjectRecord> drops;
  master_->AddReported(99, Endpoint("n9"), {Rec("x", 1, 99, 0)}, &drops);
  EXPECT_EQ(drops.size(), 1u);
  EXPECT_EQ(Keys(), 0u);
}

TEST_F(MasterResyncTest, AResyncedObjectIsReadableAndNewPutsAvoidItsRange) {
  ASSERT_TRUE(Mount("n1", 11, kSegment).ok());
  EXPECT_TRUE(Report("n1", 11, {Rec("old", 7, 11, 1024, 1000)}).empty());
  EXPECT_FALSE(Start("n1", "early", 1000).ok());  // all held: no room yet
  master_->ReleaseRange(11, 0, 1024);
  master_->ReleaseRange(11, 1024 + ChargedBytes(1000), kSegment - 1024 - ChargedBytes(1000));
  EXPECT_TRUE(Exists("old"));
  EXPECT_EQ(Get("old")->size, 1000u);
  EXPECT_EQ(RemoveCode("old"), ErrorCode::OBJECT_HAS_LEASE);  // the old master's readers
  for (int i = 0; i < 40; ++i) {
    for (const ReplicaDesc& r : Put("n1", "new" + std::to_string(i), 1000)) {
      const bool overlaps = r.offset < 1024 + ChargedBytes(1000) && 1024 < r.offset + 1024;
      EXPECT_FALSE(overlaps) << "new object at " << r.offset;
    }
  }
}

}  // namespace
}  // namespace kvtier::store
