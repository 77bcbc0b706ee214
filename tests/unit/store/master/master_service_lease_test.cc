// MasterService leases, removes and eviction: a lease blocks Remove and eviction until it runs
// out (a forced remove goes at once, its space waits for the lease); Exist grants none; removes
// by regex; eviction at the watermark frees the oldest leases by bytes; a PutStart that finds no
// room evicts synchronously and retries.
#include <gtest/gtest.h>

#include "master_service_fixture.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_F(MasterServiceTest, LeaseBlocksRemoveUntilItExpires) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  Put("n1", "k", 100);
  ASSERT_TRUE(Get("k").ok());
  auto removed = master_->Remove({"k"});
  EXPECT_EQ(ErrorCodeOf(removed[0]), ErrorCode::OBJECT_HAS_LEASE);
  EXPECT_NE(removed[0].message().find("5000 more ms"), std::string::npos) << removed[0].message();
  Advance(milliseconds(4999));
  EXPECT_EQ(RemoveCode("k"), ErrorCode::OBJECT_HAS_LEASE);
  Advance(milliseconds(1));  // lease_until == now: over
  EXPECT_EQ(RemoveCode("k"), ErrorCode::OK);
  EXPECT_EQ(GetCode("k"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(RemoveCode("k"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(Allocated(), 0u);
  EXPECT_EQ(CounterValue("kvtier_master_removes_total", {{"result", "has_lease"}}), 2);
  EXPECT_EQ(CounterValue("kvtier_master_removes_total", {{"result", "ok"}}), 1);
  EXPECT_EQ(CounterValue("kvtier_master_leases_granted_total"), 1);
}

TEST_F(MasterServiceTest, LeaseIsExtendedNeverShortened) {
  MasterOptions options;
  options.default_kv_lease_ttl = milliseconds(5000);
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  Put("n1", "k", 100);
  ASSERT_TRUE(Get("k").ok());  // until t0 + 5 s
  Advance(seconds(3));
  ASSERT_TRUE(Get("k").ok());  // until t0 + 8 s
  Advance(seconds(4));         // t0 + 7 s
  EXPECT_EQ(RemoveCode("k"), ErrorCode::OBJECT_HAS_LEASE);
  Advance(seconds(1));
  EXPECT_EQ(RemoveCode("k"), ErrorCode::OK);
}

TEST_F(MasterServiceTest, RemoveRefusesUnfinishedAndExistGrantsNoLease) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Start("n1", "pending", 100).ok());
  EXPECT_EQ(RemoveCode("pending"), ErrorCode::REPLICA_IS_NOT_READY);
  Put("n1", "k", 100);
  EXPECT_TRUE(Exists("k"));
  EXPECT_EQ(RemoveCode("k"), ErrorCode::OK);  // Exist did not lease it
  EXPECT_EQ(CounterValue("kvtier_master_leases_granted_total"), 0);
}

TEST_F(MasterServiceTest, RemoveAllSkipsLeasedAndUnfinished) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  for (const char* k : {"a", "b", "c", "leased"}) Put("n1", k, 100);
  ASSERT_TRUE(Start("n1", "pending", 100).ok());
  ASSERT_TRUE(Get("leased").ok());
  auto n = master_->RemoveAll();
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 3u);
  EXPECT_EQ(Keys(), 2u);
  EXPECT_TRUE(Exists("leased"));
  EXPECT_EQ(GetCode("pending"), ErrorCode::REPLICA_IS_NOT_READY);
  EXPECT_EQ(Allocated(), 2 * 128u);
  EXPECT_EQ(*master_->RemoveAll(), 0u);
}

TEST_F(MasterServiceTest, ForcedRemoveGoesAtOnceButItsSpaceWaitsForTheLease) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  Put("n1", "k", 100);
  ASSERT_TRUE(Get("k").ok());  // a reader holds it for 5 s
  auto removed = master_->Remove({"k"}, /*force=*/true);
  ASSERT_TRUE(removed[0].ok()) << removed[0].message();
  EXPECT_FALSE(Exists("k"));
  EXPECT_EQ(GetCode("k"), ErrorCode::OBJECT_NOT_FOUND);
  // The reader may still be copying: the bytes stay allocated until its lease ends.
  EXPECT_EQ(Allocated(), 128u);
  Advance(milliseconds(4999));
  master_->Tick();
  EXPECT_EQ(Allocated(), 128u);
  Advance(milliseconds(1));
  master_->Tick();
  EXPECT_EQ(Allocated(), 0u);
  EXPECT_EQ(CounterValue("kvtier_master_removes_total", {{"result", "forced"}}), 1);
  EXPECT_EQ(CounterValue("kvtier_master_removes_total", {{"result", "ok"}}), 0);
  // Force does not take a put that is still being written, nor a missing key.
  ASSERT_TRUE(Start("n1", "pending", 100).ok());
  EXPECT_EQ(ErrorCodeOf(master_->Remove({"pending", "missing"}, true)[0]),
            ErrorCode::REPLICA_IS_NOT_READY);
  EXPECT_EQ(ErrorCodeOf(master_->Remove({"missing"}, true)[0]), ErrorCode::OBJECT_NOT_FOUND);
}

TEST_F(MasterServiceTest, ForcedRemoveAllTakesLeasedObjectsToo) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  for (const char* k : {"a", "leased"}) Put("n1", k, 100);
  ASSERT_TRUE(Start("n1", "pending", 100).ok());
  ASSERT_TRUE(Get("leased").ok());
  EXPECT_EQ(*master_->RemoveAll(/*force=*/true), 2u);
  EXPECT_EQ(Keys(), 1u);  // the unfinished put
  EXPECT_EQ(Allocated(), 2 * 128u);  // the pending put and the leased object's space
  Advance(milliseconds(5000));
  master_->Tick();
  EXPECT_EQ(Allocated(), 128u);
}

TEST_F(MasterServiceTest, RemoveByRegexRemovesMatchingKeysOnly) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  for (const char* k : {"model-a/layer0", "model-a/layer1", "model-b/layer0", "x-model-a/"}) {
    Put("n1", k, 100);
  }
  ASSERT_TRUE(Get("model-a/layer1").ok());
  ASSERT_TRUE(Start("n1", "model-a/pending", 100).ok());
  // Matches anywhere in the key (regex_search); leased and unfinished ones stay.
  auto n = master_->RemoveByRegex("^model-a/");
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(*n, 1u);
  EXPECT_FALSE(Exists("model-a/layer0"));
  EXPECT_TRUE(Exists("model-a/layer1"));
  EXPECT_TRUE(Exists("x-model-a/"));
  EXPECT_EQ(*master_->RemoveByRegex("^model-a/", /*force=*/true), 1u);
  EXPECT_FALSE(Exists("model-a/layer1"));
  EXPECT_EQ(*master_->RemoveByRegex("layer[0-9]$"), 1u);  // model-b/layer0
  EXPECT_EQ(*master_->RemoveByRegex("nothing-matches"), 0u);
  EXPECT_TRUE(Exists("x-model-a/"));

  auto bad = master_->RemoveByRegex("model-(a");
  EXPECT_EQ(ErrorCodeOf(bad.status()), ErrorCode::INVALID_PARAMS);
  EXPECT_NE(bad.status().message().find("does not compile"), std::string::npos)
      << bad.status().message();
  EXPECT_TRUE(Exists("x-model-a/"));
}

TEST_F(MasterServiceTest, SoftPinsLapseTheirTtlAfterThePutAndTheLastRead) {
  MasterOptions options;
  options.default_kv_soft_pin_ttl = seconds(60);
  options.max_kv_soft_pin_ttl = seconds(120);
  options.eviction_high_watermark_ratio = 0.0;  // every Tick evicts all it may ...
  options.eviction_ratio = 0.0;
  options.allow_evict_soft_pinned_objects = false;  // ... but no live soft pin
  options.node_ttl = std::chrono::hours(1);        // the node stays, though it never pings
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  PutConfig ten_s;
  ten_s.soft_pin = true;
  ten_s.soft_pin_ttl_ms = 10000;
  PutConfig defaulted;
  defaulted.soft_pin = true;
  PutConfig too_long = ten_s;
  too_long.soft_pin_ttl_ms = 3600 * 1000;  // capped at 120 s
  Put("n1", "ten", 100, ten_s);
  Put("n1", "default", 100, defaulted);
  Put("n1", "capped", 100, too_long);
  Put("n1", "plain", 100);
  master_->Tick();  // only the unpinned object goes while the pins live
  EXPECT_FALSE(Exists("plain"));
  EXPECT_EQ(Keys(), 3u);
  Advance(seconds(8));
  ASSERT_TRUE(Get("ten").ok());  // a read renews the pin for another 10 s
  Advance(seconds(9));           // 17 s after the put, 9 s after the read (the lease is over)
  master_->Tick();
  EXPECT_EQ(Keys(), 3u);
  Advance(seconds(2));
  master_->Tick();  // "ten" lapsed: a plain candidate now
  EXPECT_FALSE(Exists("ten"));
  Advance(seconds(60));
  master_->Tick();
  EXPECT_FALSE(Exists("default"));
  EXPECT_TRUE(Exists("capped"));
  Advance(seconds(60));
  master_->Tick();
  EXPECT_FALSE(Exists("capped"));
}

class MasterEvictionTest : public MasterServiceTest {
 protected:
  // One segment of 64000 bytes; objects of 640 bytes take 1% each.
  static constexpr uint64_t kObject = 640;
  static constexpr uint64_t kSegment = 100 * kObject;
};

TEST_F(MasterEvictionTest, TickEvictsOldestLeasesByBytesDownToTheTarget) {
  MasterOptions options;
  options.eviction_high_watermark_ratio = 0.5;
  options.eviction_ratio = 0.2;
  options.node_ttl = std::chrono::hours(1);
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, kSegment).ok());
  // 50 objects = 50%: at the watermark, nothing happens.
  ASSERT_TRUE(Start("n1", "unfinished", kObject).ok());
  for (int i = 0; i < 49; ++i) {
    Put("n1", "k" + std::to_string(i), kObject);
    Advance(milliseconds(1));
  }
  master_->Tick();
  EXPECT_EQ(Keys(), 50u);
  EXPECT_EQ(CounterValue("kvtier_master_evictions_total"), 0);

  // Reading k0 and k1 leases them (and makes them the most recently used).
  ASSERT_TRUE(Get("k0").ok());
  ASSERT_TRUE(Get("k1").ok());
  // Two bigger objects push the use to 55%: evict down to 30% = 19200 bytes.
  Put("n1", "big-a", 3 * kObject);
  Advance(milliseconds(1));
  Put("n1", "big-b", 2 * kObject);
  ASSERT_EQ(Allocated(), 55 * kObject);
  master_->Tick();
  EXPECT_EQ(Allocated(), 30 * kObject);
  // 25 objects of 640 bytes went: the 25 oldest unleased ones, k2..k26.
  EXPECT_EQ(CounterValue("kvtier_master_evictions_total"), 25);
  EXPECT_EQ(CounterValue("kvtier_master_evicted_bytes_total"), 25.0 * kObject);
  EXPECT_TRUE(Exists("k0"));
  EXPECT_TRUE(Exists("k1"));
  for (int i = 2; i <= 26; ++i) EXPECT_FALSE(Exists("k" + std::to_string(i))) << i;
  for (int i = 27; i < 49; ++i) EXPECT_TRUE(Exists("k" + std::to_string(i))) << i;
  EXPECT_TRUE(Exists("big-a"));
  EXPECT_TRUE(Exists("big-b"));
  EXPECT_EQ(GetCode("unfinished"), ErrorCode::REPLICA_IS_NOT_READY);
}

TEST_F(MasterEvictionTest, EvictionNeverTakesLeasedOrUnfinished) {
  MasterOptions options;
  options.eviction_high_watermark_ratio = 0.1;
  options.eviction_ratio = 0.1;
  Restart(options);
  ASSERT_TRUE(Mount("n1", 1, kSegment).ok());
  for (int i = 0; i < 20; ++i) {
    Put("n1", "k" + std::to_string(i), kObject);
    ASSERT_TRUE(Get("k" + std::to_string(i)).ok());
  }
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Start("n1", "u" + std::to_string(i), kObject).ok());
  master_->Tick();  // 40% used, goal 0%: everything is protected
  EXPECT_EQ(Keys(), 40u);
  Advance(milliseconds(5000));  // the leases run out; the puts are still unfinished
  master_->Tick();
  EXPECT_EQ(Keys(), 20u);
  EXPECT_EQ(Allocated(), 20 * kObject);
}

TEST_F(MasterEvictionTest, FullSegmentEvictsOnPutStartAndRetries) {
  ASSERT_TRUE(Mount("n1", 1, kSegment).ok());
  for (int i = 0; i < 100; ++i) {
    Put("n1", "k" + std::to_string(i), kObject);
    Advance(milliseconds(1));
  }
  ASSERT_EQ(Allocated(), kSegment);
  ASSERT_TRUE(Get("k0").ok());  // the oldest is leased: it stays
  // Needs 640 bytes + 5% of 64000 = 3840 bytes: six objects, the oldest unleased.
  auto r = Start("n1", "new", kObject);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(CounterValue("kvtier_master_evictions_total"), 6);
  EXPECT_TRUE(Exists("k0"));
  for (int i = 1; i <= 6; ++i) EXPECT_FALSE(Exists("k" + std::to_string(i))) << i;
  EXPECT_TRUE(Exists("k7"));
  EXPECT_EQ(Allocated(), kSegment - 5 * kObject);
}

TEST_F(MasterEvictionTest, NoRoomWhenEverythingIsProtected) {
  ASSERT_TRUE(Mount("n1", 1, kSegment).ok());
  for (int i = 0; i < 100; ++i) {
    Put("n1", "k" + std::to_string(i), kObject);
    ASSERT_TRUE(Get("k" + std::to_string(i)).ok());
  }
  auto r = master_->PutStart("n1", {"x", "y"}, {kObject, kObject}, {});
  EXPECT_EQ(ErrorCodeOf(r[0].status()), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_NE(r[0].status().message().find("mount more segments"), std::string::npos);
  EXPECT_EQ(ErrorCodeOf(r[1].status()), ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_EQ(Keys(), 100u);
  EXPECT_EQ(CounterValue("kvtier_master_puts_total", {{"result", "no_space"}}), 2);
  // Larger than any segment: no eviction is tried at all.
  Advance(milliseconds(5000));
  EXPECT_EQ(ErrorCodeOf(Start("n1", "huge", kSegment + 1).status()),
            ErrorCode::NO_AVAILABLE_HANDLE);
  EXPECT_EQ(Keys(), 100u);
  EXPECT_EQ(CounterValue("kvtier_master_evictions_total"), 0);
  // No segment at all.
  Restart(MasterOptions{});
  EXPECT_EQ(ErrorCodeOf(Start("n1", "k", 10).status()), ErrorCode::NO_AVAILABLE_HANDLE);
}

}  // namespace
}  // namespace kvtier::store
