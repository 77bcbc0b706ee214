// ObjectShards: key and unfinished counts stay right through insert, complete, erase.
#include "store/master/object_shards.h"

#include <gtest/gtest.h>

namespace kvtier::store {
namespace {

ObjectMeta Meta(bool complete) {
  ObjectMeta m;
  m.size = 10;
  m.complete = complete;
  return m;
}

TEST(ObjectShardsTest, CountsFollowTheStateMachine) {
  ObjectShards shards;
  for (int i = 0; i < 100; ++i) {
    const std::string key = "key" + std::to_string(i);
    auto shard = shards.Lock(key);
    EXPECT_EQ(shard->Find(key), nullptr);
    shard->Insert(key, Meta(false));
  }
  EXPECT_EQ(shards.keys(), 100u);
  EXPECT_EQ(shards.unfinished(), 100u);
  for (int i = 0; i < 50; ++i) {
    const std::string key = "key" + std::to_string(i);
    auto shard = shards.Lock(key);
    ObjectMeta* meta = shard->Find(key);
    ASSERT_NE(meta, nullptr);
    shard->MarkComplete(key, *meta);
    EXPECT_TRUE(meta->complete);
    shard->MarkComplete(key, *meta);  // twice is harmless
  }
  EXPECT_EQ(shards.unfinished(), 50u);
  {
    auto shard = shards.Lock("key0");
    shard->Erase("key0");
    shard->Erase("key0");
  }
  {
    auto shard = shards.Lock("key99");
    EXPECT_EQ(shard->UnfinishedKeys(), std::vector<std::string>{"key99"});
    shard->Erase("key99");
  }
  EXPECT_EQ(shards.keys(), 98u);
  EXPECT_EQ(shards.unfinished(), 49u);

  size_t erased = 0;
  size_t seen = 0;
  for (size_t i = 0; i < ObjectShards::kNumShards; ++i) {
    auto shard = shards.LockShard(i);
    shard->ForEach([&](const std::string&, const ObjectMeta&) { ++seen; });
    erased += shard->EraseIf([](const std::string&, ObjectMeta& m) { return !m.complete; });
  }
  EXPECT_EQ(seen, 98u);
  EXPECT_EQ(erased, 49u);
  EXPECT_EQ(shards.keys(), 49u);
  EXPECT_EQ(shards.unfinished(), 0u);
}

TEST(ObjectShardsTest, KeysSpreadOverShards) {
  std::vector<int> per(ObjectShards::kNumShards, 0);
  for (int i = 0; i < 25600; ++i) ++per[ObjectShards::ShardOf("k" + std::to_string(i))];
  int used = 0;
  for (int n : per) used += n > 0;
  EXPECT_GT(used, 250);
}

}  // namespace
}  // namespace kvtier::store
