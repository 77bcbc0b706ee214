// MasterService re-replication: objects that lost a replica (or were put on too few nodes) are
// handed to a node without one, the new replica becomes visible only when the copy is reported,
// a failed copy is retried, a copy of an object that changed meanwhile is discarded, and a
// copier that goes away (or stalls past the release timeout) gives its space back.
#include <gtest/gtest.h>

#include "master_service_fixture.h"

namespace kvtier::store {
namespace {

constexpr uint64_t kSegment = 1 << 20;

class MasterRepairTest : public MasterServiceTest {
 protected:
  // "k" of `size` bytes with two replicas, on n1 and n2; then n3 joins and n2 goes away.
  void PutThenLoseOneReplica(uint64_t size = 1000) {
    ASSERT_TRUE(Mount("n1", 1, kSegment).ok());
    ASSERT_TRUE(Mount("n2", 2, kSegment).ok());
    PutConfig two;
    two.replicas = 2;
    ASSERT_EQ(Put("n1", "k", size, two).size(), 2u);
    ASSERT_TRUE(Mount("n3", 3, kSegment).ok());
    ASSERT_TRUE(master_->UnmountSegment("n2", 2).ok());
  }
  uint64_t Status(const char* field) { return master_->StatusJson()[field].get<uint64_t>(); }
  std::vector<RepairTask> Take(const std::string& node, uint64_t max_bytes = 1 << 30) {
    auto r = master_->TakeRepairs(node, max_bytes);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : std::vector<RepairTask>{};
  }
  kvtier::Status EndOne(const std::string& node, const std::string& key, bool copied) {
    return master_->EndRepairs(node, {key}, {copied}).at(0);
  }
};

TEST_F(MasterRepairTest, ALostReplicaIsCopiedToANodeWithoutOneAndShownOnlyOnceReported) {
  PutThenLoseOneReplica();
  EXPECT_EQ(Status("under_replicated"), 1u);
  EXPECT_TRUE(Take("n1").empty());  // n1 holds the surviving replica

  const std::vector<RepairTask> tasks = Take("n3");
  ASSERT_EQ(tasks.size(), 1u);
  EXPECT_EQ(tasks[0].key, "k");
  EXPECT_EQ(tasks[0].source.segment_id, 1u);
  EXPECT_EQ(tasks[0].target.segment_id, 3u);
  EXPECT_EQ(tasks[0].target.endpoint, Endpoint("n3"));
  EXPECT_EQ(tasks[0].target.size, 1000u);
  EXPECT_EQ(Status("under_replicated"), 0u);
  EXPECT_EQ(Status("repairs_pending"), 1u);
  EXPECT_EQ(Get("k")->replicas.size(), 1u);  // not visible before the copy is reported
  EXPECT_EQ(Allocated(), 2 * 1024u);         // but its space is taken
  EXPECT_TRUE(Take("n3").empty());           // one copy at a time

  EXPECT_EQ(ErrorCodeOf(EndOne("n1", "k", true)), ErrorCode::OBJECT_NOT_FOUND);  // not n1's copy
  ASSERT_TRUE(EndOne("n3", "k", true).ok());
  const auto desc = Get("k");
  ASSERT_EQ(desc->replicas.size(), 2u);
  EXPECT_EQ(desc->replicas[1].segment_id, 3u);
  EXPECT_EQ(desc->replicas[1].offset, tasks[0].target.offset);
  EXPECT_EQ(Status("repairs_pending"), 0u);
  EXPECT_EQ(CounterValue("kvtier_master_repairs_total", {{"result", "done"}}), 1);
  EXPECT_EQ(CounterValue("kvtier_master_repaired_bytes_total"), 1000);
  EXPECT_EQ(ErrorCodeOf(EndOne("n3", "k", true)), ErrorCode::OBJECT_NOT_FOUND);  // reported once
  master_->Tick();
  EXPECT_TRUE(Take("n3").empty());
}

TEST_F(MasterRepairTest, AFailedCopyIsRetriedAndACopyOfAChangedObjectIsDiscarded) {
  PutThenLoseOneReplica();
  ASSERT_EQ(Take("n3").size(), 1u);
  ASSERT_TRUE(EndOne("n3", "k", false).ok());
  EXPECT_EQ(CounterValue("kvtier_master_repairs_total", {{"result", "failed"}}), 1);
  EXPECT_EQ(Allocated(), 1024u);  // the target was freed
  EXPECT_EQ(Status("under_replicated"), 1u);

  ASSERT_EQ(Take("n3").size(), 1u);  // tried again
  ASSERT_TRUE(master_->Remove({"k"}, /*force=*/true).at(0).ok());
  Put("n1", "k", 1000);  // the same key, another object
  EXPECT_EQ(ErrorCodeOf(EndOne("n3", "k", true)), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(Get("k")->replicas.size(), 1u);
  EXPECT_EQ(CounterValue("kvtier_master_repairs_total", {{"result", "dropped"}}), 1);
  EXPECT_EQ(Allocated(), 1024u);  // only the new object's replica
}

TEST_F(MasterRepairTest, ABudgetLimitsTheTasksButOneAlwaysFits) {
  ASSERT_TRUE(Mount("n1", 1, kSegment).ok());
  PutConfig two;
  two.replicas = 2;
  for (const char* key : {"a", "b", "c"}) Put("n1", key, 1000, two);  // one node: one replica
  EXPECT_EQ(Status("under_replicated"), 3u);
  ASSERT_TRUE(Mount("n2", 2, kSegment).ok());  // a node joins: the puts get their second copy
  EXPECT_EQ(Take("n2", 1).size(), 1u);
  EXPECT_EQ(Take("n2", 2048).size(), 2u);
  EXPECT_EQ(Status("repairs_pending"), 3u);
}

TEST_F(MasterRepairTest, ACopierThatGoesAwayOrStallsGivesItsSpaceBack) {
  PutThenLoseOneReplica();
  ASSERT_EQ(Take("n3").size(), 1u);
  ASSERT_TRUE(master_->UnmountSegment("n3", 3).ok());  // the copier is gone
  master_->Tick();
  EXPECT_EQ(Status("repairs_pending"), 0u);
  EXPECT_EQ(Status("under_replicated"), 1u);
  EXPECT_EQ(ErrorCodeOf(EndOne("n3", "k", true)), ErrorCode::OBJECT_NOT_FOUND);

  ASSERT_TRUE(Mount("n4", 4, kSegment).ok());
  ASSERT_EQ(Take("n4").size(), 1u);
  master_->Tick();
  EXPECT_EQ(Status("repairs_pending"), 1u);  // still copying: its space stays taken
  Advance(MasterOptions{}.put_start_release_timeout);
  ASSERT_TRUE(Mount("n1", 1, kSegment).ok());  // n1 and n4 stay alive across the jump
  ASSERT_TRUE(Mount("n4", 4, kSegment).ok());
  master_->Tick();
  EXPECT_EQ(Status("repairs_pending"), 0u);
  EXPECT_EQ(Allocated(), 1024u);
  EXPECT_EQ(CounterValue("kvtier_master_repairs_total", {{"result", "dropped"}}), 2);
}

}  // namespace
}  // namespace kvtier::store
