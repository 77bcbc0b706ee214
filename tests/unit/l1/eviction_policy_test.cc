#include "l1/eviction_policy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "l1/lru_policy.h"
#include "l1/s3fifo_policy.h"
#include "l1_test_keys.h"

namespace kvtier {
namespace {

using ::kvtier::testing::TestKey;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Every candidate the policy offers, in order, without stopping.
std::vector<ObjectKey> AllCandidates(EvictionPolicy& policy) {
  std::vector<ObjectKey> out;
  EXPECT_FALSE(policy.ForEachCandidate([&](const ObjectKey& k) {
    out.push_back(k);
    return false;
  }));
  return out;
}

TEST(EvictionPolicyTest, FactoryKnowsNamesInAnyCase) {
  for (const char* name : {"LRU", "lru", "noop", "NOOP", "S3FIFO", "s3fifo"}) {
    auto policy = MakeEvictionPolicy(name);
    ASSERT_TRUE(policy.ok()) << name;
  }
  EXPECT_EQ((*MakeEvictionPolicy("lru"))->Name(), "LRU");
  EXPECT_EQ((*MakeEvictionPolicy("Noop"))->Name(), "noop");
}

TEST(EvictionPolicyTest, FactoryRejectsUnknownNameListingValidOnes) {
  auto policy = MakeEvictionPolicy("FIFO");
  ASSERT_FALSE(policy.ok());
  EXPECT_EQ(policy.status().code(), Code::kInvalidArgument);
  EXPECT_THAT(policy.status().message(), HasSubstr("FIFO"));
  EXPECT_THAT(policy.status().message(), HasSubstr("LRU"));
  EXPECT_THAT(policy.status().message(), HasSubstr("noop"));
}

TEST(LruPolicyTest, OffersOldestFirstAndAccessRefreshes) {
  LruPolicy lru;
  for (int i = 0; i < 4; ++i) lru.OnInsert(TestKey(i));
  lru.OnAccess(TestKey(0));
  lru.OnAccess(TestKey(99));  // unknown keys are ignored
  EXPECT_THAT(AllCandidates(lru), ElementsAre(TestKey(1), TestKey(2), TestKey(3), TestKey(0)));
  lru.OnRemove(TestKey(2));
  lru.OnRemove(TestKey(2));
  EXPECT_EQ(lru.Size(), 3u);
  EXPECT_THAT(AllCandidates(lru), ElementsAre(TestKey(1), TestKey(3), TestKey(0)));
}

TEST(LruPolicyTest, WalkStopsWhenVisitorSaysSo) {
  LruPolicy lru;
  for (int i = 0; i < 4; ++i) lru.OnInsert(TestKey(i));
  int visited = 0;
  EXPECT_TRUE(lru.ForEachCandidate([&](const ObjectKey&) { return ++visited == 2; }));
  EXPECT_EQ(visited, 2);
}

TEST(NoopPolicyTest, NeverOffersCandidates) {
  auto policy = std::move(MakeEvictionPolicy("noop")).value();
  for (int i = 0; i < 4; ++i) policy->OnInsert(TestKey(i));
  EXPECT_EQ(policy->Size(), 4u);
  EXPECT_TRUE(AllCandidates(*policy).empty());
}

TEST(S3FifoPolicyTest, OneHitWondersGoFirstAndReusedKeysArePromoted) {
  S3FifoPolicy s3;
  for (int i = 0; i < 10; ++i) s3.OnInsert(TestKey(i));
  EXPECT_EQ(s3.small_size(), 10u);
  s3.OnAccess(TestKey(0));
  s3.OnAccess(TestKey(0));  // freq 2: promoted to main instead of offered
  std::vector<ObjectKey> order;
  s3.ForEachCandidate([&](const ObjectKey& k) {
    order.push_back(k);
    return order.size() == 3;
  });
  EXPECT_THAT(order, ElementsAre(TestKey(1), TestKey(2), TestKey(3)));
  EXPECT_EQ(s3.main_size(), 1u);

  // Evicting a small-queue key leaves a ghost; inserting it again goes straight to main.
  s3.OnRemove(TestKey(1));
  EXPECT_EQ(s3.ghost_size(), 1u);
  s3.OnInsert(TestKey(1));
  EXPECT_EQ(s3.ghost_size(), 0u);
  EXPECT_EQ(s3.main_size(), 2u);
}

TEST(S3FifoPolicyTest, EachKeyIsOfferedExactlyOncePerWalk) {
  S3FifoPolicy s3;
  for (int i = 0; i < 50; ++i) s3.OnInsert(TestKey(i));
  for (int i = 0; i < 50; i += 3) {
    for (int j = 0; j < i % 5; ++j) s3.OnAccess(TestKey(i));
  }
  for (int walk = 0; walk < 3; ++walk) {
    std::vector<ObjectKey> all = AllCandidates(s3);
    EXPECT_EQ(all.size(), 50u);
    EXPECT_EQ(std::set<ObjectKey>(all.begin(), all.end()).size(), 50u);
  }
  EXPECT_EQ(s3.Size(), 50u);
}

}  // namespace
}  // namespace kvtier
