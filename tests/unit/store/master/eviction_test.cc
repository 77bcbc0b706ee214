// Eviction: the cut-off choice (oldest lease first, by bytes), the watermark arithmetic and an
// eviction pass over real shards and a real segment pool.
#include "store/master/eviction.h"

#include <gtest/gtest.h>

#include <limits>

namespace kvtier::store {
namespace {

TEST(ChooseCutoffTest, NothingToDo) {
  EXPECT_FALSE(ChooseCutoff({}, 100));
  EXPECT_FALSE(ChooseCutoff({{1, 10}}, 0));
}

TEST(ChooseCutoffTest, OldestLeasesFirstUntilTheBytesAreMet) {
  // leases 5, 1, 3, 2, 4 with 10 bytes each: 25 bytes need leases 1, 2 and part of 3.
  std::vector<LeaseBytes> c = {{5, 10}, {1, 10}, {3, 10}, {2, 10}, {4, 10}};
  auto cut = ChooseCutoff(c, 25);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->lease_until_ns, 3);
  EXPECT_EQ(cut->bytes_at_cutoff, 5u);
  cut = ChooseCutoff(c, 20);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->lease_until_ns, 2);
  EXPECT_EQ(cut->bytes_at_cutoff, 10u);
  // Bytes, not objects: one big old object can meet the goal alone.
  cut = ChooseCutoff({{9, 10}, {1, 1000}, {5, 10}}, 500);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->lease_until_ns, 1);
}

TEST(ChooseCutoffTest, TiesAtTheCutoffShareTheRemainder) {
  auto cut = ChooseCutoff({{1, 10}, {2, 10}, {2, 10}, {2, 10}}, 25);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->lease_until_ns, 2);
  EXPECT_EQ(cut->bytes_at_cutoff, 15u);
}

TEST(ChooseCutoffTest, NotEnoughTakesEverything) {
  auto cut = ChooseCutoff({{1, 10}, {7, 10}}, 1000);
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->lease_until_ns, 7);
  EXPECT_EQ(cut->bytes_at_cutoff, std::numeric_limits<uint64_t>::max());
}

TEST(BytesOverWatermarkTest, Arithmetic) {
  EXPECT_EQ(BytesOverWatermark(0, 0, 0.9, 0.1), 0u);
  EXPECT_EQ(BytesOverWatermark(900, 1000, 0.9, 0.1), 0u);    // at the watermark: nothing
  EXPECT_EQ(BytesOverWatermark(901, 1000, 0.9, 0.1), 101u);  // down to 800
  EXPECT_EQ(BytesOverWatermark(1000, 1000, 0.95, 0.05), 100u);
  EXPECT_EQ(BytesOverWatermark(1000, 1000, 0.5, 0.9), 1000u);  // target below 0 -> 0
}

class EvictorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(pool_.Mount("n", "h:1", SegmentInfo{1, 64 * 100, ""}).ok()); }
  // A complete object of `blocks` x 64 bytes whose lease ended at `lease`; a soft pin lasts
  // until `soft_pin_until` (the tests evict at now = 100).
  void Add(const std::string& key, uint64_t blocks, int64_t lease, bool complete = true,
           bool hard_pin = false, bool soft_pin = false, int64_t soft_pin_until = 1000) {
    ObjectMeta meta;
    meta.size = blocks * 64;
    meta.writer = "n";
    meta.complete = complete;
    meta.hard_pin = hard_pin;
    meta.soft_pin_ttl_ns = soft_pin ? 1000 : 0;
    meta.soft_pin_until_ns = soft_pin ? soft_pin_until : 0;
    meta.lease_until_ns = lease;
    meta.replicas = pool_.Allocate(meta.size, 1, "n", "");
    ASSERT_EQ(meta.replicas.size(), 1u);
    auto shard = shards_.Lock(key);
    shard->Insert(key, std::move(meta));
  }
  bool Has(const std::string& key) {
    auto shard = shards_.Lock(key);
    return shard->Find(key) != nullptr;
  }

  ObjectShards shards_;
  SegmentPool pool_{1};
  Evictor evictor_{&shards_, &pool_};
};

TEST_F(EvictorTest, EvictsOldestLeasesByBytesAndSkipsLeasedAndUnfinished) {
  Add("old-small", 1, 10);
  Add("old-big", 10, 20);
  Add("mid", 5, 30);
  Add("new", 5, 40);
  Add("leased", 1, 1000);  // lease still live at now = 100
  Add("writing", 1, 0, /*complete=*/false);
  const uint64_t used = pool_.Totals().used_bytes;

  // 11 blocks: old-small (1) + old-big (10) meet it exactly.
  EvictionResult r = evictor_.Evict(11 * 64, /*now_ns=*/100);
  EXPECT_EQ(r.objects, 2u);
  EXPECT_EQ(r.bytes, 11u * 64);
  EXPECT_FALSE(Has("old-small"));
  EXPECT_FALSE(Has("old-big"));
  EXPECT_TRUE(Has("mid"));
  EXPECT_EQ(pool_.Totals().used_bytes, used - 11 * 64);
  EXPECT_EQ(shards_.keys(), 4u);

  // Asking for everything takes only the evictable ones.
  r = evictor_.Evict(1 << 30, 100);
  EXPECT_EQ(r.objects, 2u);
  EXPECT_TRUE(Has("leased"));
  EXPECT_TRUE(Has("writing"));
  EXPECT_EQ(evictor_.Evict(1 << 30, 100).objects, 0u);

  // Once the lease has run out, the leased object is a candidate too.
  r = evictor_.Evict(1, 1000);
  EXPECT_EQ(r.objects, 1u);
  EXPECT_FALSE(Has("leased"));
  EXPECT_TRUE(Has("writing"));
}

TEST_F(EvictorTest, PartialCutoffEvictsOnlyEnoughOfTheTiedObjects) {
  for (int i = 0; i < 10; ++i) Add("k" + std::to_string(i), 1, 5);
  EvictionResult r = evictor_.Evict(3 * 64, 100);
  EXPECT_EQ(r.objects, 3u);
  EXPECT_EQ(shards_.keys(), 7u);
}

TEST_F(EvictorTest, APutThatLostTheRaceToAnotherPassDoesNotEvictAgain) {
  for (int i = 0; i < 10; ++i) Add("k" + std::to_string(i), 1, i);
  const uint64_t seen = evictor_.passes();
  EXPECT_EQ(evictor_.Evict(64, 100).objects, 1u);  // another put's (or Tick's) pass
  EXPECT_EQ(evictor_.passes(), seen + 1);
  EvictionResult r = evictor_.EvictIfNoPassSince(seen, 64, 100);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(r.objects, 0u);
  EXPECT_EQ(shards_.keys(), 9u);
  r = evictor_.EvictIfNoPassSince(evictor_.passes(), 64, 100);
  EXPECT_FALSE(r.skipped);
  EXPECT_EQ(r.objects, 1u);
  EXPECT_FALSE(Has("k1"));
}

TEST_F(EvictorTest, HardPinsStaySoftPinsGoLastOldestFirst) {
  Add("hard-oldest", 1, 1, true, /*hard_pin=*/true);
  Add("soft-old", 1, 2, true, false, /*soft_pin=*/true);
  Add("soft-new", 1, 3, true, false, /*soft_pin=*/true);
  Add("plain-newest", 1, 50);
  // One block: the unpinned object goes first, although its lease is the newest.
  EXPECT_EQ(evictor_.Evict(64, 100).objects, 1u);
  EXPECT_FALSE(Has("plain-newest"));
  // Then the soft pins, oldest first; never the hard pin.
  EXPECT_EQ(evictor_.Evict(64, 100).objects, 1u);
  EXPECT_FALSE(Has("soft-old"));
  EXPECT_TRUE(Has("soft-new"));
  EvictionResult r = evictor_.Evict(1 << 30, 100);
  EXPECT_EQ(r.objects, 1u);
  EXPECT_TRUE(Has("hard-oldest"));
  // A pass that needs more than the unpinned objects hold takes soft pins for the rest.
  Add("plain", 1, 60);
  Add("soft", 1, 61, true, false, true);
  r = evictor_.Evict(2 * 64, 100);
  EXPECT_EQ(r.objects, 2u);
  EXPECT_EQ(r.bytes, 2u * 64);
  EXPECT_TRUE(Has("hard-oldest"));
}

TEST_F(EvictorTest, ALapsedSoftPinIsAPlainCandidate) {
  Add("soft-lapsed", 1, 1, true, false, /*soft_pin=*/true, /*soft_pin_until=*/50);
  Add("soft-live", 1, 2, true, false, /*soft_pin=*/true);
  Add("plain", 1, 3);
  // Two blocks: the lapsed pin and the plain object (oldest first) go; the live pin stays.
  EXPECT_EQ(evictor_.Evict(2 * 64, 100).objects, 2u);
  EXPECT_FALSE(Has("soft-lapsed"));
  EXPECT_TRUE(Has("soft-live"));
  // At now = 1000 its pin has lapsed too.
  EXPECT_EQ(evictor_.Evict(64, 1000).objects, 1u);
  EXPECT_FALSE(Has("soft-live"));
}

TEST_F(EvictorTest, SoftPinsStayWhenTheMasterKeepsThem) {
  Evictor keeper{&shards_, &pool_, /*evict_soft_pinned=*/false};
  Add("soft", 1, 1, true, false, /*soft_pin=*/true);
  Add("plain", 1, 2);
  EXPECT_EQ(keeper.Evict(1 << 30, 100).objects, 1u);
  EXPECT_TRUE(Has("soft"));
  EXPECT_EQ(keeper.Evict(1 << 30, 1000).objects, 1u);  // lapsed: now a candidate
  EXPECT_FALSE(Has("soft"));
}

}  // namespace
}  // namespace kvtier::store
