// ObjectShards: key and unfinished counts stay right through insert, complete, erase; with
// KVTIER_LONG=1 (make test-long), 10M objects in at most 200 bytes each of table memory.
#include "store/master/object_shards.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

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

TEST(ObjectShardsTest, EraseIfCanEmptyEveryShard) {
  ObjectShards shards;
  for (int i = 0; i < 3000; ++i) {
    const std::string key = "key" + std::to_string(i);
    shards.Lock(key)->Insert(key, Meta(i % 2 == 0));
  }
  const uint64_t full = shards.MemoryBytes();
  std::vector<std::string> seen;
  for (size_t i = 0; i < ObjectShards::kNumShards; ++i) {
    shards.LockShard(i)->EraseIf([&](const std::string& key, ObjectMeta&) {
      seen.push_back(key);
      return true;
    });
  }
  EXPECT_EQ(seen.size(), 3000u);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
  EXPECT_EQ(shards.keys(), 0u);
  EXPECT_EQ(shards.unfinished(), 0u);
  EXPECT_LT(shards.MemoryBytes(), full / 10);  // emptied tables give their memory back
  shards.Lock("again")->Insert("again", Meta(false));
  EXPECT_EQ(shards.Lock("again")->UnfinishedKeys(), std::vector<std::string>{"again"});
}

// Prefetch is a hint: lookups answer the same after it, for present, absent and empty keys, and
// it is safe while other threads insert, erase and empty shards (scripts/sanitize.sh runs it under
// TSan).
TEST(ObjectShardsTest, PrefetchIsOnlyAHint) {
  ObjectShards shards;
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "key" + std::to_string(i);
    shards.Lock(key)->Insert(key, Meta(true));
  }
  std::vector<std::string> batch = {"", "missing"};
  for (int i = 0; i < 1000; i += 7) batch.push_back("key" + std::to_string(i));
  shards.Prefetch(batch);
  shards.Prefetch({});
  for (const std::string& key : batch) {
    const bool present = key.starts_with("key");
    EXPECT_EQ(shards.Lock(key)->Find(key) != nullptr, present) << key;
  }
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    for (int round = 0; !stop.load(); ++round) {
      for (int i = 0; i < 1000; ++i) {
        const std::string key = "key" + std::to_string(i);
        auto shard = shards.Lock(key);
        if (round % 2 == 0) {
          shard->Erase(key);
        } else {
          shard->Insert(key, Meta(true));
        }
      }
    }
  });
  for (int i = 0; i < 300; ++i) shards.Prefetch(batch);
  stop = true;
  churn.join();
}

TEST(ObjectShardsTest, TenMillionObjectsFitTheBudget) {
  if (std::getenv("KVTIER_LONG") == nullptr) GTEST_SKIP() << "set KVTIER_LONG=1 (make test-long)";
  ObjectShards shards;
  const uint64_t n = 10'000'000;
  auto key = [](uint64_t i) {
    std::string k = "bench-model@00010001@0@" + std::to_string(i * 0x9e3779b97f4a7c15ULL);
    k.resize(80, 'k');
    return k;
  };
  for (uint64_t i = 0; i < n; ++i) {
    const std::string k = key(i);
    ObjectMeta m = Meta(true);
    m.serial = i;
    shards.Lock(k)->Insert(k, std::move(m));
  }
  EXPECT_EQ(shards.keys(), n);
  EXPECT_LE(static_cast<double>(shards.MemoryBytes()) / n, 200.0);
  for (uint64_t i = 0; i < n; i += 9973) {
    const std::string k = key(i);
    ObjectMeta* m = shards.Lock(k)->Find(k);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->serial, i);
  }
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
