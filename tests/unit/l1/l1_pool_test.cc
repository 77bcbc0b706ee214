#include "l1/l1_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "l1_test_keys.h"

namespace kvtier {
namespace {

using ::kvtier::testing::TestKey;
using ::kvtier::testing::TestKeys;
using std::chrono::milliseconds;
using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr uint64_t kObject = 64 << 10;        // 64 KiB objects
constexpr uint64_t kCapacity = 16 * kObject;  // room for 16

class L1PoolTest : public ::testing::Test {
 protected:
  L1Options Options(const char* policy = "LRU") {
    L1Options o;
    o.capacity_bytes = kCapacity;
    o.alignment = 4096;
    o.trigger_watermark = 0.75;  // 12 objects
    o.target_watermark = 0.5;    // 8 objects
    o.policy = policy;
    o.prefault = false;
    o.huge_pages = false;
    o.read_lock_ttl = seconds(10);
    o.write_lock_ttl = seconds(20);
    o.clock = &clock_;
    return o;
  }

  std::unique_ptr<L1Pool> MakePool(const L1Options& o) {
    auto pool = L1Pool::Create(o);
    EXPECT_TRUE(pool.ok()) << pool.status().ToString();
    return std::move(pool).value();
  }

  // Reserves and publishes keys [first, first + count), one FinishWrite per key.
  static void Store(L1Pool& pool, uint64_t first, uint64_t count, uint64_t size = kObject) {
    for (uint64_t i = first; i < first + count; ++i) {
      const std::vector<ObjectKey> key{TestKey(i)};
      auto slots = pool.ReserveWrite(key, size);
      ASSERT_TRUE(slots.ok()) << i << ": " << slots.status().ToString();
      ASSERT_NE((*slots)[0].data, nullptr) << i;
      pool.FinishWrite(key);
    }
  }

  static bool Has(const L1Pool& pool, uint64_t i) { return pool.Contains(TestKey(i)); }

  FakeClock clock_;
};

TEST_F(L1PoolTest, CreateRejectsBadOptions) {
  struct Case {
    const char* what;
    void (*mutate)(L1Options&);
  };
  const Case cases[] = {
      {"capacity", [](L1Options& o) { o.capacity_bytes = 0; }},
      {"capacity", [](L1Options& o) { o.capacity_bytes = 100; }},
      {"alignment", [](L1Options& o) { o.alignment = 0; }},
      {"alignment", [](L1Options& o) { o.alignment = 3000; }},
      {"trigger", [](L1Options& o) { o.trigger_watermark = 1.5; }},
      {"trigger", [](L1Options& o) { o.trigger_watermark = 0; }},
      {"trigger", [](L1Options& o) { o.trigger_watermark = std::nan(""); }},
      {"target", [](L1Options& o) { o.target_watermark = 0.9; }},
      {"target", [](L1Options& o) { o.target_watermark = -0.1; }},
      {"TTL", [](L1Options& o) { o.read_lock_ttl = milliseconds(0); }},
      {"valid: LRU", [](L1Options& o) { o.policy = "MRU"; }},
  };
  for (const Case& c : cases) {
    L1Options o = Options();
    c.mutate(o);
    auto pool = L1Pool::Create(o);
    ASSERT_FALSE(pool.ok()) << c.what;
    EXPECT_EQ(pool.status().code(), Code::kInvalidArgument) << c.what;
    EXPECT_THAT(pool.status().message(), HasSubstr(c.what));
  }
}

TEST_F(L1PoolTest, CreateMapsTheArena) {
  L1Options o = Options();
  o.capacity_bytes = kCapacity + 100;  // the unaligned tail is not usable
  o.trigger_watermark = 1.0;
  o.target_watermark = 1.0;
  auto pool = MakePool(o);
  EXPECT_NE(pool->ArenaBase(), nullptr);
  EXPECT_GE(pool->ArenaFd(), 0);
  EXPECT_EQ(pool->ArenaSize(), kCapacity + 100);
  EXPECT_EQ(pool->Stats().capacity_bytes, kCapacity);
  EXPECT_EQ(pool->Stats().used_bytes, 0u);
}

TEST_F(L1PoolTest, BadReserveArguments) {
  auto pool = MakePool(Options());
  const std::vector<ObjectKey> keys{TestKey(1)};
  EXPECT_EQ(pool->ReserveWrite(keys, 0).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(pool->ReserveWrite(keys, kCapacity + 1).status().code(), Code::kOutOfMemory);
  EXPECT_EQ(pool->ReserveWrite(keys, std::numeric_limits<uint64_t>::max()).status().code(),
            Code::kOutOfMemory);
  auto empty = pool->ReserveWrite({}, kObject);
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

TEST_F(L1PoolTest, StagingIsInvisibleUntilFinishWrite) {
  auto pool = MakePool(Options());
  const auto keys = TestKeys(0, 3);
  auto slots = pool->ReserveWrite(keys, 1000);
  ASSERT_TRUE(slots.ok());
  for (const WriteSlot& s : *slots) {
    EXPECT_NE(s.data, nullptr);
    EXPECT_EQ(s.size, 1000u);
    EXPECT_EQ((s.data - pool->ArenaBase()) % 4096, 0);
  }
  EXPECT_FALSE(pool->Contains(keys[0]));
  EXPECT_EQ(pool->CountPrefix(keys), 0u);
  EXPECT_EQ(pool->Pin(keys)[0].data, nullptr);
  L1Stats s = pool->Stats();
  EXPECT_EQ(s.used_bytes, 3 * 4096u);
  EXPECT_EQ(s.staging_bytes, 3 * 4096u);
  EXPECT_EQ(s.objects, 0u);

  pool->FinishWrite(keys);
  EXPECT_TRUE(pool->Contains(keys[0]));
  EXPECT_EQ(pool->CountPrefix(keys), 3u);
  s = pool->Stats();
  EXPECT_EQ(s.staging_bytes, 0u);
  EXPECT_EQ(s.objects, 3u);
  EXPECT_EQ(s.used_bytes, 3 * 4096u);
}

TEST_F(L1PoolTest, CountPrefixStopsAtFirstMiss) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 2);
  Store(*pool, 3, 1);
  EXPECT_EQ(pool->CountPrefix(TestKeys(0, 5)), 2u);
  EXPECT_EQ(pool->CountPrefix(TestKeys(1, 3)), 1u);
  EXPECT_EQ(pool->CountPrefix(TestKeys(2, 3)), 0u);
}

TEST_F(L1PoolTest, ResidentStagingAndDuplicateKeysAreSkipped) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 1);
  ASSERT_TRUE(pool->ReserveWrite(TestKeys(1, 1), kObject).ok());  // key 1 staging
  const std::vector<ObjectKey> keys{TestKey(0), TestKey(1), TestKey(2), TestKey(2)};
  auto slots = pool->ReserveWrite(keys, kObject);
  ASSERT_TRUE(slots.ok());
  EXPECT_EQ((*slots)[0].data, nullptr);  // resident
  EXPECT_EQ((*slots)[1].data, nullptr);  // someone else's staging
  EXPECT_NE((*slots)[2].data, nullptr);
  EXPECT_EQ((*slots)[3].data, nullptr);  // duplicate within the batch
  EXPECT_EQ(pool->Stats().used_bytes, 3 * kObject);
}

TEST_F(L1PoolTest, AbortWriteFreesBytes) {
  auto pool = MakePool(Options());
  const auto keys = TestKeys(0, 4);
  ASSERT_TRUE(pool->ReserveWrite(keys, kObject).ok());
  EXPECT_EQ(pool->Stats().used_bytes, 4 * kObject);
  pool->AbortWrite(keys);
  EXPECT_EQ(pool->Stats().used_bytes, 0u);
  EXPECT_EQ(pool->Stats().staging_bytes, 0u);
  pool->FinishWrite(keys);  // nothing left to publish
  EXPECT_FALSE(pool->Contains(keys[0]));
}

TEST_F(L1PoolTest, AbortWriteLeavesResidentObjects) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 1);
  pool->AbortWrite(TestKeys(0, 1));
  EXPECT_TRUE(Has(*pool, 0));
}

TEST_F(L1PoolTest, WriteSlotBytesReadBackThroughReadPin) {
  auto pool = MakePool(Options());
  const auto keys = TestKeys(0, 3);
  const uint64_t size = 10'000;  // not a multiple of the alignment
  auto slots = pool->ReserveWrite(keys, size);
  ASSERT_TRUE(slots.ok());
  for (size_t k = 0; k < keys.size(); ++k) {
    for (uint64_t i = 0; i < size; ++i) (*slots)[k].data[i] = static_cast<uint8_t>(i * 7 + k);
  }
  pool->FinishWrite(keys);
  const std::vector<ReadPin> pins = pool->Pin(keys);
  for (size_t k = 0; k < keys.size(); ++k) {
    ASSERT_NE(pins[k].data, nullptr);
    ASSERT_EQ(pins[k].size, size);
    EXPECT_EQ(pins[k].data, (*slots)[k].data);
    for (uint64_t i = 0; i < size; ++i) {
      ASSERT_EQ(pins[k].data[i], static_cast<uint8_t>(i * 7 + k)) << k << " " << i;
    }
  }
  pool->Unpin(keys);
}

TEST_F(L1PoolTest, BatchThatDoesNotFitReservesNothing) {
  MetricsRegistry metrics;
  L1Options o = Options("noop");
  o.metrics = &metrics;
  auto pool = MakePool(o);
  Store(*pool, 0, 14);
  const L1Stats before = pool->Stats();
  auto slots = pool->ReserveWrite(TestKeys(100, 3), kObject);  // 2 would fit
  ASSERT_FALSE(slots.ok());
  EXPECT_EQ(slots.status().code(), Code::kOutOfMemory);
  EXPECT_THAT(slots.status().message(), HasSubstr("requested 3 x 65536 bytes"));
  EXPECT_THAT(slots.status().message(), HasSubstr("131072 of 1048576 bytes free"));
  const L1Stats after = pool->Stats();
  EXPECT_EQ(after.used_bytes, before.used_bytes);
  EXPECT_EQ(after.alloc_failures, 1u);
  EXPECT_FALSE(Has(*pool, 100));
  EXPECT_EQ(metrics.GetCounter("kvtier_l1_alloc_failures_total", "")->Value(), 1.0);
  // The two that fit are still available.
  EXPECT_TRUE(pool->ReserveWrite(TestKeys(100, 2), kObject).ok());
}

TEST_F(L1PoolTest, NoopPolicyNeverEvicts) {
  auto pool = MakePool(Options("noop"));
  Store(*pool, 0, 16);
  EXPECT_EQ(pool->EvictIfNeeded(), 0u);
  EXPECT_EQ(pool->ReserveWrite(TestKeys(16, 1), kObject).status().code(), Code::kOutOfMemory);
  const L1Stats s = pool->Stats();
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.objects, 16u);
  EXPECT_EQ(s.alloc_failures, 1u);
  EXPECT_EQ(pool->Clear(), 16u);
  EXPECT_EQ(pool->Stats().used_bytes, 0u);
}

TEST_F(L1PoolTest, LruEvictsOldestFromTriggerDownToTarget) {
  MetricsRegistry metrics;
  L1Options o = Options();
  o.metrics = &metrics;
  auto pool = MakePool(o);
  Store(*pool, 0, 11);  // below the trigger (12)
  EXPECT_EQ(pool->Stats().evictions, 0u);
  Store(*pool, 11, 1);  // reaches the trigger: evict down to 8 objects
  const L1Stats s = pool->Stats();
  EXPECT_EQ(s.evictions, 4u);
  EXPECT_EQ(s.evicted_bytes, 4 * kObject);
  EXPECT_EQ(s.used_bytes, 8 * kObject);
  EXPECT_EQ(s.objects, 8u);
  for (int i = 0; i < 4; ++i) EXPECT_FALSE(Has(*pool, i)) << i;
  for (int i = 4; i < 12; ++i) EXPECT_TRUE(Has(*pool, i)) << i;

  EXPECT_EQ(metrics.GetGauge("kvtier_l1_used_bytes", "")->Value(), 8.0 * kObject);
  EXPECT_EQ(metrics.GetGauge("kvtier_l1_capacity_bytes", "")->Value(), 1.0 * kCapacity);
  EXPECT_EQ(metrics.GetGauge("kvtier_l1_objects", "")->Value(), 8.0);
  EXPECT_EQ(metrics.GetCounter("kvtier_l1_evictions_total", "")->Value(), 4.0);
  EXPECT_EQ(metrics.GetCounter("kvtier_l1_evicted_bytes_total", "")->Value(), 4.0 * kObject);
}

TEST_F(L1PoolTest, EvictionCountsBytesNotObjects) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 4, 2 * kObject);  // 8 units
  Store(*pool, 4, 3);               // 11 units
  Store(*pool, 7, 1);               // 12 units: free >= 4 units, oldest first = two big ones
  EXPECT_EQ(pool->Stats().evictions, 2u);
  EXPECT_EQ(pool->Stats().used_bytes, 8 * kObject);
  EXPECT_FALSE(Has(*pool, 0));
  EXPECT_FALSE(Has(*pool, 1));
  EXPECT_TRUE(Has(*pool, 2));
}

TEST_F(L1PoolTest, TouchAndPinRefreshRecency) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 11);
  pool->Touch(TestKeys(0, 1));
  pool->Pin(TestKeys(1, 1));
  pool->Unpin(TestKeys(1, 1));
  Store(*pool, 11, 1);
  EXPECT_TRUE(Has(*pool, 0));
  EXPECT_TRUE(Has(*pool, 1));
  for (int i = 2; i < 6; ++i) EXPECT_FALSE(Has(*pool, i)) << i;
  EXPECT_TRUE(Has(*pool, 6));
}

TEST_F(L1PoolTest, PinnedObjectsSurviveEvictionAndClear) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 11);
  const auto pinned = TestKeys(0, 2);
  pool->Pin(pinned);
  pool->Touch(TestKeys(2, 9));  // pinning counted as use; make the pinned keys the oldest again
  Store(*pool, 11, 1);
  EXPECT_TRUE(Has(*pool, 0));
  EXPECT_TRUE(Has(*pool, 1));
  for (int i = 2; i < 6; ++i) EXPECT_FALSE(Has(*pool, i)) << i;
  EXPECT_EQ(pool->Stats().pinned_objects, 2u);

  EXPECT_EQ(pool->Clear(), 6u);
  EXPECT_TRUE(Has(*pool, 0));
  EXPECT_TRUE(Has(*pool, 1));
  EXPECT_EQ(pool->Stats().objects, 2u);
  pool->Unpin(pinned);
  EXPECT_EQ(pool->Clear(), 2u);
  EXPECT_EQ(pool->Stats().used_bytes, 0u);
}

TEST_F(L1PoolTest, PinsAreCounted) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 1);
  const auto key = TestKeys(0, 1);
  EXPECT_NE(pool->Pin(key, 3)[0].data, nullptr);
  pool->Unpin(key, 2);
  EXPECT_EQ(pool->Stats().pinned_objects, 1u);
  EXPECT_EQ(pool->Clear(), 0u);
  pool->Unpin(key);
  EXPECT_EQ(pool->Stats().pinned_objects, 0u);
  pool->Unpin(key, 5);  // more than held: no-op
  pool->Pin(key);
  EXPECT_EQ(pool->Stats().pinned_objects, 1u);
  EXPECT_EQ(pool->Pin(TestKeys(7, 1))[0].data, nullptr);  // not resident
}

TEST_F(L1PoolTest, ExpiredPinsNoLongerProtect) {
  auto pool = MakePool(Options());  // read TTL 10 s
  Store(*pool, 0, 11);
  pool->Pin(TestKeys(0, 1));
  clock_.Advance(seconds(6));
  pool->Pin(TestKeys(0, 1));  // extends the deadline to t+16
  clock_.Advance(seconds(6));
  EXPECT_EQ(pool->Stats().pinned_objects, 1u);
  EXPECT_EQ(pool->Clear(), 10u);
  clock_.Advance(seconds(5));  // past t+16: two pins outstanding, both expired
  EXPECT_EQ(pool->Stats().pinned_objects, 0u);
  EXPECT_EQ(pool->Clear(), 1u);

  // An expired pin also stops protecting against eviction.
  Store(*pool, 100, 11);
  pool->Pin(TestKeys(100, 1));
  pool->Touch(TestKeys(101, 10));  // key 100 is the oldest again
  clock_.Advance(seconds(11));
  Store(*pool, 111, 1);
  EXPECT_FALSE(Has(*pool, 100));
}

TEST_F(L1PoolTest, ExpiredStagingIsReclaimed) {
  auto pool = MakePool(Options());  // write TTL 20 s
  ASSERT_TRUE(pool->ReserveWrite(TestKeys(0, 2), kObject).ok());
  clock_.Advance(seconds(19));
  EXPECT_EQ(pool->EvictIfNeeded(), 0u);
  EXPECT_EQ(pool->Stats().staging_bytes, 2 * kObject);
  clock_.Advance(seconds(2));
  EXPECT_EQ(pool->EvictIfNeeded(), 2u);
  EXPECT_EQ(pool->Stats().used_bytes, 0u);
  EXPECT_EQ(pool->Stats().evictions, 0u);  // reclaiming is not eviction
  pool->FinishWrite(TestKeys(0, 2));
  EXPECT_FALSE(Has(*pool, 0));
}

TEST_F(L1PoolTest, ExpiredStagingPassesToTheNextWriter) {
  auto pool = MakePool(Options());
  ASSERT_TRUE(pool->ReserveWrite(TestKeys(0, 1), kObject).ok());
  EXPECT_EQ((*pool->ReserveWrite(TestKeys(0, 1), kObject))[0].data, nullptr);
  clock_.Advance(seconds(21));
  auto slots = pool->ReserveWrite(TestKeys(0, 1), kObject);
  ASSERT_TRUE(slots.ok());
  EXPECT_NE((*slots)[0].data, nullptr);
  EXPECT_EQ(pool->Stats().used_bytes, kObject);
}

TEST_F(L1PoolTest, FullPoolEvictsToFitANewBatch) {
  L1Options o = Options();
  o.trigger_watermark = 1.0;
  o.target_watermark = 1.0;
  auto pool = MakePool(o);
  Store(*pool, 0, 16);
  auto slots = pool->ReserveWrite(TestKeys(16, 2), kObject);
  ASSERT_TRUE(slots.ok()) << slots.status().ToString();
  EXPECT_FALSE(Has(*pool, 0));
  EXPECT_FALSE(Has(*pool, 1));
  EXPECT_TRUE(Has(*pool, 2));
  EXPECT_EQ(pool->Stats().evictions, 2u);
}

TEST_F(L1PoolTest, PinnedAndStagingObjectsAreNeverEvictedToMakeRoom) {
  L1Options o = Options();
  o.trigger_watermark = 1.0;
  o.target_watermark = 1.0;
  auto pool = MakePool(o);
  Store(*pool, 0, 12);
  pool->Pin(TestKeys(0, 12));
  ASSERT_TRUE(pool->ReserveWrite(TestKeys(12, 4), kObject).ok());  // staging, now full
  auto slots = pool->ReserveWrite(TestKeys(16, 1), kObject);
  EXPECT_EQ(slots.status().code(), Code::kOutOfMemory);
  const L1Stats s = pool->Stats();
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_EQ(s.objects, 12u);
  EXPECT_EQ(s.staging_bytes, 4 * kObject);
  EXPECT_EQ(s.alloc_failures, 1u);
}

TEST_F(L1PoolTest, FragmentedPoolEvictsUntilABlockFits) {
  L1Options o = Options();
  o.trigger_watermark = 1.0;
  o.target_watermark = 1.0;
  auto pool = MakePool(o);
  Store(*pool, 0, 16);
  // Free every other object: 8 objects of room, but no two adjacent.
  std::vector<ObjectKey> odd;
  for (int i = 1; i < 16; i += 2) odd.push_back(TestKey(i));
  pool->Pin(odd);
  EXPECT_EQ(pool->Clear(), 8u);
  pool->Unpin(odd);
  pool->Touch(odd);
  auto slots = pool->ReserveWrite(TestKeys(100, 1), 2 * kObject);
  ASSERT_TRUE(slots.ok()) << slots.status().ToString();
  EXPECT_GE(pool->Stats().evictions, 1u);
}

TEST_F(L1PoolTest, ClearWithAPrefixRemovesOnlyThatModelsUnpinnedObjects) {
  auto pool = MakePool(Options());
  Store(*pool, 0, 4);  // test-model
  std::vector<ObjectKey> other = TestKeys(10, 3);
  for (ObjectKey& k : other) k.model = "test-model-2";  // "test-model" is a prefix of its name
  for (const ObjectKey& k : other) {
    auto slots = pool->ReserveWrite({&k, 1}, kObject);
    ASSERT_TRUE(slots.ok()) << slots.status().ToString();
    pool->FinishWrite({&k, 1});
  }
  pool->Pin(TestKeys(0, 1));
  EXPECT_EQ(pool->Clear("nothing-like-it@"), 0u);
  EXPECT_EQ(pool->Clear("test-model@"), 3u);  // the pinned one stays, the other model's too
  EXPECT_TRUE(Has(*pool, 0));
  EXPECT_FALSE(Has(*pool, 1));
  for (const ObjectKey& k : other) EXPECT_TRUE(pool->Contains(k));
  EXPECT_EQ(pool->Clear(other[1].ToString()), 1u);  // a whole key is a prefix of itself
  EXPECT_FALSE(pool->Contains(other[1]));
  EXPECT_EQ(pool->Clear("test-model"), 2u);  // no '@': both models' unpinned objects
  EXPECT_EQ(pool->Stats().objects, 1u);
}

TEST_F(L1PoolTest, S3FifoPoolEvicts) {
  auto pool = MakePool(Options("S3FIFO"));
  Store(*pool, 0, 30);
  const L1Stats s = pool->Stats();
  EXPECT_LT(s.used_bytes, 12 * kObject);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_TRUE(Has(*pool, 29));
}

}  // namespace
}  // namespace kvtier

namespace kvtier {
namespace {

class L1PoolL2HooksTest : public ::testing::Test {
 protected:
  std::unique_ptr<L1Pool> MakePool() {
    L1Options o;
    o.capacity_bytes = 16 * (64 << 10);
    o.trigger_watermark = 0.75;
    o.target_watermark = 0.5;
    o.prefault = false;
    o.huge_pages = false;
    o.clock = &clock_;
    return std::move(L1Pool::Create(o)).value();
  }
  FakeClock clock_;
};

TEST_F(L1PoolL2HooksTest, FinishWriteCanPinInTheSameStep) {
  auto pool = MakePool();
  const auto keys = testing::TestKeys(0, 16);
  ASSERT_TRUE(pool->ReserveWrite(keys, 64 << 10).ok());
  // Publishing 16 objects crosses the trigger: eviction runs inside FinishWrite, but pinned
  // objects cannot be its victims.
  pool->FinishWrite(keys, /*pin_count=*/1);
  for (const auto& k : keys) EXPECT_TRUE(pool->Contains(k));
  pool->Unpin(keys);
  EXPECT_GT(pool->EvictIfNeeded(), 0u);
}

TEST_F(L1PoolL2HooksTest, EraseRemovesOnlyUnpinnedResidentKeys) {
  auto pool = MakePool();
  const auto keys = testing::TestKeys(0, 3);
  ASSERT_TRUE(pool->ReserveWrite(keys, 4096).ok());
  pool->FinishWrite(keys);
  pool->Pin(std::span(keys).subspan(0, 1));
  const auto staging = testing::TestKeys(10, 1);
  ASSERT_TRUE(pool->ReserveWrite(staging, 4096).ok());
  std::vector<ObjectKey> all = keys;
  all.push_back(staging[0]);
  all.push_back(testing::TestKey(99));  // unknown
  EXPECT_EQ(pool->Erase(all), 2u);
  EXPECT_TRUE(pool->Contains(keys[0]));  // pinned
  EXPECT_FALSE(pool->Contains(keys[1]));
  pool->FinishWrite(staging);  // the staging object was not touched
  EXPECT_TRUE(pool->Contains(staging[0]));
}

}  // namespace
}  // namespace kvtier
