// L2Capacity through a real L2Cascade, against a real fs directory and a real redis-server: the
// adapter stays under max_bytes by evicting the least recent keys through the delete lane, spares
// keys a lookup holds locked, rebuilds its accounting from the directory after a restart, and
// CLEAR removes what the server stored. Redis keys expire with ttl_s.
#include "server/l2_capacity.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "connectors/connector_registry.h"
#include "server/l2_cascade.h"
#include "support/eventually.h"
#include "support/redis_process.h"
#include "unit/connectors/connector_test_util.h"

namespace kvtier {
namespace {

using namespace kvtier::testing;
using std::chrono::milliseconds;

constexpr size_t kValue = 64 << 10;
const auto kKeys = Keys(16);
const auto kValues = Values(16, kValue);

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/kvt-l2cap-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  // Object files on disk (temp files excluded).
  size_t Files() const {
    size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(path_)) {
      if (e.is_regular_file() && !e.path().filename().string().starts_with(".tmp-")) ++n;
    }
    return n;
  }

 private:
  std::string path_;
};

std::string FsAdapter(const TempDir& d, size_t max_objects, const std::string& extra = "") {
  return R"({"type":"fs","path":")" + d.path() + R"(","max_bytes":)" +
         std::to_string(max_objects * kValue) + extra + "}";
}

std::unique_ptr<L2Cascade> Cascade(MetricsRegistry& metrics, const std::string& json) {
  auto l2 = L2Cascade::Create({json}, ConnectorRegistry::WithBuiltins(), metrics);
  EXPECT_TRUE(l2.ok()) << l2.status().ToString();
  return l2.ok() ? std::move(l2).value() : nullptr;
}

Completion Store(L2Cascade& l2, size_t first, size_t n) {
  std::vector<std::string> keys(kKeys.begin() + first, kKeys.begin() + first + n);
  std::vector<ConstBuffer> src;
  for (size_t i = first; i < first + n; ++i) src.push_back({kValues[i].data(), kValue});
  return l2.Submit(0, ConnectorOp::kWrite, [&](Connector& c) { return c.SubmitWrite(keys, src); })
      .get();
}

// Which of keys [0, n) a lookup finds (and unlocks again unless `keep_locked`).
std::vector<uint8_t> Found(L2Cascade& l2, size_t n, bool keep_locked = false) {
  std::vector<std::string> keys(kKeys.begin(), kKeys.begin() + n);
  Completion c =
      l2.Submit(0, ConnectorOp::kLookup, [&](Connector& x) { return x.SubmitLookup(keys); }).get();
  EXPECT_TRUE(c.status.ok()) << c.status.ToString();
  if (!keep_locked) l2.adapter(0).Unlock(keys);
  return c.results;
}

std::vector<uint8_t> Bits(std::initializer_list<int> bits) {
  return std::vector<uint8_t>(bits.begin(), bits.end());
}

TEST(L2CapacityTest, FsStaysUnderItsCapacityEvictingTheOldestFirst) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsAdapter(dir, 4));
  for (size_t i = 0; i < 10; ++i) {
    ASSERT_EQ(Store(*l2, i, 1).Hits(), 1u);
    EXPECT_LE(l2->adapter(0).usage().bytes, 4 * kValue);
  }
  ASSERT_TRUE(Eventually([&] { return dir.Files() == 4; })) << dir.Files() << " files";
  EXPECT_EQ(Found(*l2, 10), Bits({0, 0, 0, 0, 0, 0, 1, 1, 1, 1}));
  const L2Capacity::Usage u = l2->adapter(0).usage();
  EXPECT_EQ(u.objects, 4u);
  EXPECT_EQ(u.bytes, 4 * kValue);
  EXPECT_EQ(u.capacity_bytes, 4 * kValue);
  ASSERT_TRUE(Eventually([&] { return l2->adapter(0).usage().evictions == 6; }));
  const std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("kvtier_l2_evictions_total{adapter=\"fs#0\"} 6"), std::string::npos) << text;
  EXPECT_NE(text.find("kvtier_l2_stored_objects{adapter=\"fs#0\"} 4"), std::string::npos);
  const nlohmann::json status = l2->Status();
  EXPECT_EQ(status[0]["stored_bytes"], 4 * kValue);
  EXPECT_EQ(status[0]["evictions"], 6);
  // What is left still loads byte for byte.
  std::vector<std::vector<uint8_t>> out(4, std::vector<uint8_t>(kValue));
  std::vector<std::string> keys(kKeys.begin() + 6, kKeys.begin() + 10);
  std::vector<MutableBuffer> dst;
  for (auto& o : out) dst.push_back({o.data(), kValue});
  Completion ld = l2->Submit(0, ConnectorOp::kLoad, [&](Connector& c) {
                      return c.SubmitLoad(keys, dst);
                    }).get();
  EXPECT_EQ(ld.Hits(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(out[i], kValues[6 + i]) << "key " << 6 + i;
}

TEST(L2CapacityTest, ALookedUpKeyIsRecentAndALockedOneIsSpared) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsAdapter(dir, 4));
  ASSERT_EQ(Store(*l2, 0, 4).Hits(), 4u);
  // LRU: a hit on key 0 makes key 1 the oldest.
  std::vector<std::string> first = {kKeys[0]};
  l2->Submit(0, ConnectorOp::kLookup, [&](Connector& c) { return c.SubmitLookup(first); }).get();
  l2->adapter(0).Unlock(first);
  ASSERT_EQ(Store(*l2, 4, 1).Hits(), 1u);
  ASSERT_TRUE(Eventually([&] { return dir.Files() == 4; }));
  EXPECT_EQ(Found(*l2, 5), Bits({1, 0, 1, 1, 1}));
  // That lookup touched 0, 2, 3, 4 in this order, so key 0 is the oldest; a lookup holds it
  // locked, so keys 2 and 3 go instead.
  std::vector<std::string> locked = {kKeys[0]};
  l2->Submit(0, ConnectorOp::kLookup, [&](Connector& c) { return c.SubmitLookup(locked); }).get();
  ASSERT_EQ(Store(*l2, 5, 2).Hits(), 2u);
  ASSERT_TRUE(Eventually([&] { return dir.Files() == 4; }));
  l2->adapter(0).Unlock(locked);
  EXPECT_EQ(Found(*l2, 7), Bits({1, 0, 0, 0, 1, 1, 1}));
}

TEST(L2CapacityTest, ALookupOnTheCallersThreadCountsAsAnAccessAndIsRecorded) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsAdapter(dir, 4));
  ASSERT_EQ(Store(*l2, 0, 4).Hits(), 4u);
  // LRU: this hit on key 0 makes key 1 the oldest, as a submitted lookup would.
  std::vector<std::string> first = {kKeys[0], "m@00000000@0@absent"};
  auto now = FirstAnswer([&] { return l2->LookupNow(0, first); });
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->results, Bits({1, 0}));
  EXPECT_TRUE(l2->adapter(0).Locked(kKeys[0]));
  l2->adapter(0).Unlock(first);
  ASSERT_EQ(Store(*l2, 4, 1).Hits(), 1u);
  ASSERT_TRUE(Eventually([&] { return dir.Files() == 4; }));
  EXPECT_EQ(Found(*l2, 5), Bits({1, 0, 1, 1, 1}));
  // Recorded like a routed completion: the lookup metrics count it.
  const std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find(R"(kvtier_l2_keys_total{adapter="fs#0",op="lookup"} 7)"), std::string::npos)
      << text;
}

TEST(L2CapacityTest, AnFsAdapterRebuildsItsAccountingFromTheDirectoryAfterARestart) {
  TempDir dir;
  {
    MetricsRegistry metrics;
    auto l2 = Cascade(metrics, FsAdapter(dir, 8));
    for (size_t i = 0; i < 6; ++i) {
      ASSERT_EQ(Store(*l2, i, 1).Hits(), 1u);
      std::this_thread::sleep_for(milliseconds(20));  // eviction orders by mtime (tick grain)
    }
  }
  {
    MetricsRegistry metrics;
    auto l2 = Cascade(metrics, FsAdapter(dir, 8));
    EXPECT_EQ(l2->adapter(0).usage().objects, 6u);
    EXPECT_EQ(l2->adapter(0).usage().bytes, 6 * kValue);
  }
  // Restarted with a smaller capacity: the oldest go at once.
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsAdapter(dir, 3));
  EXPECT_EQ(l2->adapter(0).usage().objects, 3u);
  ASSERT_TRUE(Eventually([&] { return dir.Files() == 3; }));
  EXPECT_EQ(Found(*l2, 6), Bits({0, 0, 0, 1, 1, 1}));
}

TEST(L2CapacityTest, ClearRemovesWhatTheServerStored) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsAdapter(dir, 100));
  ASSERT_EQ(Store(*l2, 0, 5).Hits(), 5u);
  EXPECT_EQ(l2->Clear(), 5u);
  EXPECT_EQ(dir.Files(), 0u);
  EXPECT_EQ(l2->adapter(0).usage().objects, 0u);
  EXPECT_EQ(l2->adapter(0).usage().bytes, 0u);
  EXPECT_EQ(l2->adapter(0).usage().evictions, 0u);  // a clear is not an eviction
}

TEST(L2CapacityTest, ClearWithAPrefixRemovesOnlyThoseKeys) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsAdapter(dir, 100));
  ASSERT_EQ(Store(*l2, 0, 5).Hits(), 5u);
  EXPECT_EQ(l2->Clear("other-model@"), 0u);
  EXPECT_EQ(l2->Clear(kKeys[2]), 1u);
  EXPECT_EQ(Found(*l2, 5), Bits({1, 1, 0, 1, 1}));
  EXPECT_EQ(dir.Files(), 4u);
  EXPECT_EQ(l2->adapter(0).usage().objects, 4u);
  EXPECT_EQ(l2->Clear("m@"), 4u);
  EXPECT_EQ(dir.Files(), 0u);
}

TEST(L2CapacityTest, S3FifoIsSelectableAndOtherPoliciesAreRefused) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsAdapter(dir, 2, R"(,"eviction_policy":"s3fifo")"));
  ASSERT_NE(l2, nullptr);
  ASSERT_EQ(Store(*l2, 0, 5).Hits(), 5u);
  EXPECT_LE(l2->adapter(0).usage().bytes, 2 * kValue);
  ASSERT_TRUE(Eventually([&] { return dir.Files() == 2; }));

  auto bad = L2Cascade::Create({FsAdapter(dir, 2, R"(,"eviction_policy":"noop")")},
                               ConnectorRegistry::WithBuiltins(), metrics);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("eviction_policy must be"), std::string::npos);
  auto both = L2Cascade::Create({FsAdapter(dir, 2, R"(,"max_gb":1)")},
                                ConnectorRegistry::WithBuiltins(), metrics);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("not both"), std::string::npos);
}

TEST(L2CapacityTest, RedisStaysUnderItsCapacityAndKeysExpireWithTtl) {
  auto redis = RedisProcess::Start();
  ASSERT_NE(redis, nullptr);
  const std::string base =
      R"({"type":"resp","host":"127.0.0.1","port":)" + std::to_string(redis->port());
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, base + R"(,"max_bytes":)" + std::to_string(3 * kValue) + "}");
  for (size_t i = 0; i < 8; ++i) ASSERT_EQ(Store(*l2, i, 1).Hits(), 1u);
  ASSERT_TRUE(Eventually([&] {
    return Found(*l2, 8) == Bits({0, 0, 0, 0, 0, 1, 1, 1});
  })) << "evicted keys still in redis";
  EXPECT_EQ(l2->adapter(0).usage().objects, 3u);
  l2.reset();

  auto ttl = Cascade(metrics, base + R"(,"ttl_s":1})");
  ASSERT_EQ(Store(*ttl, 10, 1).Hits(), 1u);
  std::vector<std::string> key = {kKeys[10]};
  auto exists = [&] {
    Completion c =
        ttl->Submit(0, ConnectorOp::kLookup, [&](Connector& x) { return x.SubmitLookup(key); })
            .get();
    ttl->adapter(0).Unlock(key);
    return c.Hits() == 1;
  };
  EXPECT_TRUE(exists());
  EXPECT_TRUE(Eventually([&] { return !exists(); })) << "ttl_s 1 did not expire the key";
}

}  // namespace
}  // namespace kvtier
