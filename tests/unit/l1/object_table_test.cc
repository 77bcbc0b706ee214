#include "l1/object_table.h"

#include <gtest/gtest.h>

#include "l1_test_keys.h"

namespace kvtier {
namespace {

using ::kvtier::testing::TestKey;

TEST(ObjectTableTest, StagingIsInvisibleUntilPublished) {
  ObjectTable t;
  t.InsertStaging(TestKey(1), 0, 100, 4096, /*write_deadline_ns=*/1000);
  EXPECT_NE(t.Find(TestKey(1)), nullptr);
  EXPECT_EQ(t.FindResident(TestKey(1)), nullptr);
  EXPECT_EQ(t.staging_bytes(), 4096u);
  EXPECT_EQ(t.resident_objects(), 0u);
  EXPECT_TRUE(t.Publish(TestKey(1)));
  EXPECT_FALSE(t.Publish(TestKey(1)));
  EXPECT_NE(t.FindResident(TestKey(1)), nullptr);
  EXPECT_EQ(t.staging_bytes(), 0u);
  EXPECT_EQ(t.resident_bytes(), 4096u);
  EXPECT_EQ(t.Erase(TestKey(1)).alloc_size, 4096u);
  EXPECT_EQ(t.resident_bytes(), 0u);
  EXPECT_EQ(t.Erase(TestKey(1)).alloc_size, 0u);
}

TEST(ObjectTableTest, ExpiredStagingIsListed) {
  ObjectTable t;
  t.InsertStaging(TestKey(1), 0, 100, 4096, 1000);
  t.InsertStaging(TestKey(2), 4096, 100, 4096, 2000);
  EXPECT_TRUE(t.ExpiredStaging(999).empty());
  EXPECT_EQ(t.ExpiredStaging(1000).size(), 1u);
  EXPECT_EQ(t.ExpiredStaging(5000).size(), 2u);
  t.Publish(TestKey(2));
  EXPECT_EQ(t.ExpiredStaging(5000).size(), 1u);
}

TEST(ObjectTableTest, ReadLocksAreCountedAndExpire) {
  ObjectEntry e;
  e.state = ObjectState::kResident;
  ObjectTable::AddReadLocks(e, 2, /*now_ns=*/0, /*ttl_ns=*/100);
  EXPECT_TRUE(e.Pinned(99));
  EXPECT_FALSE(e.Pinned(100));
  ObjectTable::ReleaseReadLocks(e, 1, 50);
  EXPECT_TRUE(e.Pinned(50));
  ObjectTable::ReleaseReadLocks(e, 5, 50);  // more than held: just zero
  EXPECT_FALSE(e.Pinned(50));

  ObjectTable::AddReadLocks(e, 3, 0, 100);
  ObjectTable::AddReadLocks(e, 1, 80, 100);  // extends the deadline for all four
  EXPECT_TRUE(e.Pinned(150));
  EXPECT_EQ(e.read_locks, 4u);
  // After expiry the count starts again from zero.
  ObjectTable::AddReadLocks(e, 1, 500, 100);
  EXPECT_EQ(e.read_locks, 1u);
}

}  // namespace
}  // namespace kvtier
