// A master that takes over (docs/store/failover.md): what one master recorded in its journal,
// a successor restores, with the same objects at the same places, its allocator agreeing, and
// nothing of what was removed, unmounted or unfinished.
#include <gtest/gtest.h>

#include "master_service_fixture.h"
#include "memory_journal.h"
#include "store/master/journal_records.h"

namespace kvtier::store {
namespace {

class MasterRestoreTest : public MasterServiceTest {
 protected:
  void SetUp() override {
    MasterServiceTest::SetUp();
    master_->SetJournal(&journal_);
  }
  // The successor: a fresh master (same clock) restored from what was recorded.
  RestoreStats TakeOver(uint64_t term = 2, MasterOptions options = {}) {
    const JournalState state = journal_.State();
    Restart(options);
    next_journal_ = std::make_unique<MemoryJournal>();
    master_->SetJournal(next_journal_.get());
    return master_->Restore(state, term << 32);
  }

  MemoryJournal journal_;
  std::unique_ptr<MemoryJournal> next_journal_;
};

TEST_F(MasterRestoreTest, TheSuccessorServesTheSameObjectsAtTheSamePlaces) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 22, 1 << 20).ok());
  PutConfig two;
  two.replicas = 2;
  const auto a = Put("n1", "a", 1000, two);
  const auto b = Put("n2", "b", 70000);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_TRUE(Start("n1", "unfinished", 5000).ok());  // never recorded
  const uint64_t allocated_complete = Allocated() - ChargedBytes(5000);

  const RestoreStats stats = TakeOver();
  EXPECT_EQ(stats.segments, 2u);
  EXPECT_EQ(stats.objects, 2u);
  EXPECT_EQ(stats.objects_dropped + stats.replicas_dropped, 0u);
  EXPECT_EQ(Keys(), 2u);
  EXPECT_EQ(Allocated(), allocated_complete);
  auto got = Get("a");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->replicas.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got->replicas[i].segment_id, a[i].segment_id);
    EXPECT_EQ(got->replicas[i].offset, a[i].offset);
    EXPECT_EQ(got->replicas[i].endpoint, a[i].endpoint);
  }
  EXPECT_EQ(Get("b")->replicas.at(0).offset, b.at(0).offset);
  EXPECT_EQ(GetCode("unfinished"), ErrorCode::OBJECT_NOT_FOUND);
  // Its PutEnd, sent to the successor, fails: a put in flight at a failover does not land.
  EXPECT_EQ(ErrorCodeOf(End("n1", "unfinished")), ErrorCode::OBJECT_NOT_FOUND);

  // The nodes are known: their pings need no remount, and new puts avoid the restored ranges.
  EXPECT_FALSE(master_->Ping(Node("n1"))->need_remount);
  for (int i = 0; i < 20; ++i) {
    for (const ReplicaDesc& r : Put("n2", "new" + std::to_string(i), 1000)) {
      if (r.segment_id != b[0].segment_id) continue;
      const bool overlaps = r.offset < b[0].offset + ChargedBytes(b[0].size) &&
                            b[0].offset < r.offset + ChargedBytes(r.size);
      EXPECT_FALSE(overlaps) << "new object at " << r.offset;
    }
  }
}

TEST_F(MasterRestoreTest, RemovedAndUnmountedObjectsStayGone) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 22, 1 << 20).ok());
  PutConfig on_n2;
  on_n2.preferred_segment = Endpoint("n2");
  Put("n1", "kept", 1000);
  Put("n1", "removed", 1000);
  Put("n2", "on-n2", 1000, on_n2);
  Advance(std::chrono::seconds(6));  // past the read leases
  ASSERT_EQ(RemoveCode("removed"), ErrorCode::OK);
  ASSERT_TRUE(master_->UnmountSegment("n2", 22).ok());

  const RestoreStats stats = TakeOver();
  EXPECT_EQ(stats.segments, 1u);
  EXPECT_EQ(stats.objects, 1u);
  EXPECT_TRUE(Exists("kept"));
  EXPECT_FALSE(Exists("removed"));
  EXPECT_FALSE(Exists("on-n2"));
  EXPECT_TRUE(master_->Ping(Node("n2"))->need_remount);
}

TEST_F(MasterRestoreTest, ARecordOfAnOlderMountOfTheSegmentIsStale) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  Put("n1", "old", 1000);
  JournalState state = journal_.State();
  // The segment was unmounted and mounted again meanwhile (a newer generation); "old" still
  // names the older mount.
  state.segments.at(0).generation += 1;
  Restart(MasterOptions{});
  const RestoreStats stats = master_->Restore(state, 3ull << 32);
  EXPECT_EQ(stats.objects, 0u);
  EXPECT_EQ(stats.objects_dropped, 1u);
  EXPECT_EQ(Allocated(), 0u);
}

TEST_F(MasterRestoreTest, TwoRecordsClaimingOneRangeKeepTheFirst) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  Put("n1", "a", 1000);
  JournalState state = journal_.State();
  state.objects.push_back({"b", state.objects.at(0).second});  // a damaged journal
  Restart(MasterOptions{});
  const RestoreStats stats = master_->Restore(state, 3ull << 32);
  EXPECT_EQ(stats.objects, 1u);
  EXPECT_EQ(stats.replicas_dropped, 1u);
  EXPECT_TRUE(Exists("a"));
  EXPECT_FALSE(Exists("b"));
}

TEST_F(MasterRestoreTest, ARestoredObjectHasAReadLeaseAndItsPins) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  PutConfig pinned;
  pinned.hard_pin = true;
  Put("n1", "pinned", 1000, pinned);
  Put("n1", "plain", 1000);
  Put("n1", "evictable", 1000);
  Advance(std::chrono::seconds(60));
  MasterOptions evict_all;  // every unpinned, unleased object is over the watermark
  evict_all.eviction_high_watermark_ratio = 0;
  evict_all.eviction_ratio = 0;
  TakeOver(2, evict_all);
  // Readers of the old master may still be copying: no remove or eviction until the new lease
  // ends.
  EXPECT_EQ(RemoveCode("plain"), ErrorCode::OBJECT_HAS_LEASE);
  master_->Tick();
  EXPECT_TRUE(Exists("evictable"));
  Advance(std::chrono::seconds(6));
  EXPECT_EQ(RemoveCode("plain"), ErrorCode::OK);
  master_->Tick();
  EXPECT_FALSE(Exists("evictable"));
  EXPECT_TRUE(Exists("pinned"));  // its hard pin came through the journal
}

TEST_F(MasterRestoreTest, APutEndsOnlyOnceRecorded) {
  MemoryJournal manual(/*auto_commit=*/false);
  master_->SetJournal(&manual);
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  ASSERT_TRUE(Start("n1", "k", 1000).ok());
  // The memory journal's Wait fails what is not committed: the put's end reports it.
  const Status ended = End("n1", "k");
  EXPECT_EQ(ErrorCodeOf(ended), ErrorCode::ETCD_OPERATION_ERROR);
  EXPECT_NE(ended.message().find("may be gone after a master failover"), std::string::npos)
      << ended.message();
}

TEST_F(MasterRestoreTest, ARemovedObjectsSpaceIsFreedOnlyOnceTheRemovalIsRecorded) {
  MemoryJournal manual(/*auto_commit=*/false);
  master_->SetJournal(&manual);
  ASSERT_TRUE(Mount("n1", 11, 4096).ok());
  ASSERT_TRUE(Start("n1", "k", 4096).ok());
  (void)End("n1", "k");
  manual.Commit();
  Advance(std::chrono::seconds(6));
  ASSERT_EQ(RemoveCode("k"), ErrorCode::OK);
  // Not recorded yet: the space stays taken, so no new object can land on the removed one's
  // bytes while a successor could still bring its record back.
  EXPECT_EQ(Allocated(), 4096u);
  EXPECT_EQ(ErrorCodeOf(Start("n1", "next", 4096).status()), ErrorCode::NO_AVAILABLE_HANDLE);
  manual.Commit();
  EXPECT_EQ(Allocated(), 0u);
  EXPECT_TRUE(Start("n1", "next", 4096).ok());
}

TEST(JournalRecordsTest, RoundTripAndDamage) {
  JournalObject o;
  o.size = 123456;
  o.want_replicas = 3;
  o.hard_pin = true;
  o.soft_pin_ttl_ns = 99;
  o.replicas = {{1, 2, 3, 4}, {5, (7ull << 32) + 6, 64, 128}};
  auto back = DecodeObjectRecord(EncodeObjectRecord(o));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->size, o.size);
  EXPECT_EQ(back->want_replicas, 3);
  EXPECT_TRUE(back->hard_pin);
  EXPECT_EQ(back->soft_pin_ttl_ns, 99);
  ASSERT_EQ(back->replicas.size(), 2u);
  EXPECT_EQ(back->replicas[1].generation, (7ull << 32) + 6);
  EXPECT_EQ(back->replicas[1].offset, 64u);

  const JournalSegment s{0xfedcba9876543210ull, 42, 1 << 30, "h:1", "node", "h:2"};
  auto seg = DecodeSegmentRecord(EncodeSegmentRecord(s));
  ASSERT_TRUE(seg);
  EXPECT_EQ(seg->id, s.id);
  EXPECT_EQ(seg->node_endpoint, "h:2");
  EXPECT_EQ(SegmentRecordKey("/kvtier/x", s.id), "/kvtier/x/seg/fedcba9876543210");

  EXPECT_FALSE(DecodeObjectRecord(""));
  EXPECT_FALSE(DecodeObjectRecord("\x93\x01\x02\x03"));      // too few fields
  EXPECT_FALSE(DecodeSegmentRecord(EncodeObjectRecord(o)));  // wrong types
  std::string truncated = EncodeObjectRecord(o);
  truncated.pop_back();
  EXPECT_FALSE(DecodeObjectRecord(truncated));
}

}  // namespace
}  // namespace kvtier::store
