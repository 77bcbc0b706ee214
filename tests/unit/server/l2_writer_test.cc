// L2Writer and L2Prefetcher against a real L1 pool and real (mem) adapters: every pin the
// store path takes is released whatever the outcome, the queue bound skips instead of blocking,
// and prefetch publishes only what loaded.
#include "server/l2_writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "server/l2_prefetch.h"
#include "support/eventually.h"

namespace kvtier {
namespace {

using kvtier::testing::Eventually;

constexpr uint64_t kObject = 64 << 10;

std::unique_ptr<L1Pool> MakeL1() {
  L1Options o;
  o.capacity_bytes = 64 * kObject;
  o.prefault = false;
  o.huge_pages = false;
  return std::move(L1Pool::Create(o)).value();
}

std::vector<ObjectKey> Keys(uint64_t first, size_t n) {
  std::vector<ObjectKey> out;
  for (size_t i = 0; i < n; ++i) {
    ObjectKey k;
    k.model = "m";
    k.hash[0] = static_cast<uint8_t>(first + i);
    k.hash[1] = 7;
    out.push_back(k);
  }
  return out;
}

// Does what STORE does: writes keys into L1 (bytes derived from the key), publishes them
// pinned for the controller, and hands them over.
void Store(L1Pool& l1, L2Writer& sc, const std::vector<ObjectKey>& keys) {
  auto slots = l1.ReserveWrite(keys, kObject);
  ASSERT_TRUE(slots.ok());
  std::vector<ConstBuffer> bytes;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::memset((*slots)[i].data, keys[i].hash[0], kObject);
    bytes.push_back({(*slots)[i].data, kObject});
  }
  l1.FinishWrite(keys, sc.PinsPerKey());
  sc.OnL1Written(keys, bytes);
}

TEST(L2WriterTest, CopiesToEveryAdapterAndReleasesAllPins) {
  MetricsRegistry metrics;
  auto l1 = MakeL1();
  auto l2 = std::move(L2Cascade::Create({R"({"type":"mem"})", R"({"type":"mem","num_threads":1})"},
                                        ConnectorRegistry::WithBuiltins(), metrics))
                .value();
  L2Writer sc(*l1, *l2, metrics, /*skip_l1=*/false);
  for (uint64_t b = 0; b < 8; ++b) {
    auto keys = Keys(b * 4, 4);
    Store(*l1, sc, keys);
  }
  ASSERT_TRUE(Eventually([&] {
    return l2->adapter(0).Stats().ops[2].hits == 32 && l2->adapter(1).Stats().ops[2].hits == 32;
  }));
  EXPECT_TRUE(Eventually([&] { return l1->Stats().pinned_objects == 0; }));
  EXPECT_EQ(l1->Stats().objects, 32u);  // default policy keeps L1
  sc.Stop();
  l2->Close();
}

TEST(L2WriterTest, AFullQueueSkipsAndAFailingAdapterStillReleasesPins) {
  MetricsRegistry metrics;
  auto l1 = MakeL1();
  // 64 KiB in flight, 256 KiB queued at most; every store takes 300 ms and fails (deadline 50).
  auto l2 = std::move(L2Cascade::Create(
                          {R"({"type":"mem","delay_ms":300,"deadline_ms":50,"max_inflight_mb":0.0625,"num_threads":1})"},
                          ConnectorRegistry::WithBuiltins(), metrics))
                .value();
  L2Writer sc(*l1, *l2, metrics, false);
  for (uint64_t b = 0; b < 16; ++b) {
    auto keys = Keys(b, 1);
    Store(*l1, sc, keys);
  }
  auto skipped = [&](const char* reason) {
    return metrics
        .GetCounter("kvtier_l2_write_skipped_keys_total", "",
                    {{"adapter", "mem#0"}, {"reason", reason}})
        ->Value();
  };
  EXPECT_GT(skipped("queue_full"), 0);  // 16 objects into room for 4 queued + 1 in flight
  // The adapter fails, is marked down, and what is queued behind it is skipped, not waited on.
  ASSERT_TRUE(Eventually([&] { return l1->Stats().pinned_objects == 0; }));
  EXPECT_FALSE(l2->Up(0));
  EXPECT_GT(skipped("adapter_down") + skipped("queue_full"), 0);
  EXPECT_EQ(l2->adapter(0).Stats().ops[2].hits, 0u);
  sc.Stop();
  // The deprecated names count the same, for dashboards not yet moved (docs/metrics.md).
  for (const char* reason : {"queue_full", "adapter_down"}) {
    EXPECT_EQ(metrics
                  .GetCounter("kvtier_l2_store_skipped_keys_total", "",
                              {{"adapter", "mem#0"}, {"reason", reason}})
                  ->Value(),
              skipped(reason))
        << reason;
  }
  EXPECT_GT(metrics.GetCounter("kvtier_l2_write_failed_keys_total", "", {{"adapter", "mem#0"}})
                ->Value(),
            0);
  EXPECT_EQ(metrics.GetCounter("kvtier_l2_store_failed_keys_total", "", {{"adapter", "mem#0"}})
                ->Value(),
            metrics.GetCounter("kvtier_l2_write_failed_keys_total", "", {{"adapter", "mem#0"}})
                ->Value());
  l2->Close();
}

TEST(L2WriterTest, SkipL1ErasesWhatReachedL2) {
  MetricsRegistry metrics;
  auto l1 = MakeL1();
  auto l2 = std::move(L2Cascade::Create({R"({"type":"mem"})"}, ConnectorRegistry::WithBuiltins(), metrics)).value();
  L2Writer sc(*l1, *l2, metrics, /*skip_l1=*/true);
  auto keys = Keys(100, 4);
  Store(*l1, sc, keys);
  EXPECT_TRUE(Eventually([&] { return l1->Stats().objects == 0; }));
  sc.Stop();
  l2->Close();
}

TEST(L2PrefetcherTest, LoadsTheLeadingRunAndPinsIt) {
  MetricsRegistry metrics;
  auto l1 = MakeL1();
  auto l2 = std::move(L2Cascade::Create({R"({"type":"mem"})"}, ConnectorRegistry::WithBuiltins(), metrics)).value();
  {
    L2Writer sc(*l1, *l2, metrics, false);
    auto keys = Keys(0, 6);
    Store(*l1, sc, keys);
    ASSERT_TRUE(Eventually([&] { return l2->adapter(0).Stats().ops[2].hits == 6; }));
    sc.Stop();
  }
  ASSERT_EQ(l1->Clear(), 6u);
  // Chunk 3 of a 2-rank request is missing on rank 1: only chunks 0..2 can be served.
  auto rank0 = Keys(0, 3);  // chunks 0,1,2 of rank 0 ... stored above as keys 0..2
  auto rank1 = Keys(3, 3);  // rank 1's chunks are keys 3,4,5
  rank0.push_back(Keys(50, 1)[0]);
  rank1.push_back(Keys(60, 1)[0]);
  L2Prefetcher p(*l1, *l2);
  auto got = p.Run({rank0, rank1}, {kObject, kObject});
  EXPECT_EQ(got.chunks, 3u);
  EXPECT_EQ(got.pinned.size(), 6u);
  auto pins = l1->Pin(got.pinned);
  for (size_t i = 0; i < pins.size(); ++i) {
    ASSERT_NE(pins[i].data, nullptr);
    EXPECT_EQ(pins[i].data[kObject - 1], got.pinned[i].hash[0]);
  }
  l1->Unpin(got.pinned, 2);
  EXPECT_EQ(l1->Stats().pinned_objects, 0u);
  EXPECT_EQ(l1->Stats().staging_bytes, 0u);          // nothing left half-done
  EXPECT_EQ(l2->adapter(0).Stats().locked_keys, 0u);  // every lookup lock released
  l2->Close();
}

TEST(L2PrefetcherTest, APlanLargerThanL1IsHalvedUntilItFits) {
  MetricsRegistry metrics;
  auto l1 = MakeL1();  // room for 64 objects
  auto l2 = std::move(L2Cascade::Create({R"({"type":"mem"})"}, ConnectorRegistry::WithBuiltins(), metrics)).value();
  {
    L2Writer sc(*l1, *l2, metrics, /*skip_l1=*/true);  // L1 empties itself
    for (uint64_t b = 0; b < 10; ++b) {
      Store(*l1, sc, Keys(b * 10, 10));
      ASSERT_TRUE(Eventually([&] { return l2->adapter(0).Stats().ops[2].hits == (b + 1) * 10; }));
    }
    sc.Stop();
  }
  ASSERT_TRUE(Eventually([&] { return l1->Stats().objects == 0; }));
  L2Prefetcher p(*l1, *l2);
  auto got = p.Run({Keys(0, 100)}, {kObject});
  EXPECT_EQ(got.chunks, 50u);  // 100 do not fit, 50 do
  l1->Unpin(got.pinned);
  EXPECT_EQ(l1->Stats().staging_bytes, 0u);
  EXPECT_EQ(l2->adapter(0).Stats().locked_keys, 0u);
  l2->Close();
}

}  // namespace
}  // namespace kvtier
