// The master's term reaches every descriptor it hands out and every ping reply, so nodes can
// refuse the descriptors of a master whose term is over (docs/store/failover.md). A master
// without etcd has term 0 and its answers are what they were.
#include <gtest/gtest.h>

#include "master_service_fixture.h"
#include "memory_journal.h"

namespace kvtier::store {
namespace {

TEST_F(MasterServiceTest, AMasterWithoutEtcdHandsOutTermZero) {
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  EXPECT_EQ(Put("n1", "a", 100).at(0).term, 0u);
  EXPECT_EQ(Get("a")->replicas.at(0).term, 0u);
  EXPECT_EQ(master_->Ping(Node("n1"))->term, 0u);
}

TEST_F(MasterServiceTest, ASuccessorsDescriptorsAndPingsCarryItsTerm) {
  MemoryJournal journal;
  master_->SetJournal(&journal);
  ASSERT_TRUE(Mount("n1", 11, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 22, 1 << 20).ok());
  Put("n1", "a", 100);
  const JournalState state = journal.State();

  constexpr uint64_t kTerm = 7;
  Restart({});
  MemoryJournal next;
  master_->SetJournal(&next);
  master_->Restore(state, kTerm << 32);  // as master_server.cc passes it
  EXPECT_EQ(master_->Ping(Node("n1"))->term, kTerm);
  EXPECT_EQ(Get("a")->replicas.at(0).term, kTerm);  // restored objects: the reader's master's
  auto started = Start("n2", "b", 100);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->at(0).term, kTerm);
  // Re-replication: an object that lost a replica is copied to another node; both ends of the
  // task carry the term.
  PutConfig two;
  two.replicas = 2;
  Put("n1", "c", 100, two);
  ASSERT_TRUE(master_->UnmountSegment("n2", 22).ok());
  ASSERT_TRUE(Mount("n3", 33, 1 << 20).ok());
  auto tasks = master_->TakeRepairs("n3", 1 << 20);
  ASSERT_TRUE(tasks.ok());
  ASSERT_EQ(tasks->size(), 1u);
  EXPECT_EQ(tasks->at(0).source.term, kTerm);
  EXPECT_EQ(tasks->at(0).target.term, kTerm);
}

}  // namespace
}  // namespace kvtier::store
