// Exclusive L2 adapters (server/l2_capacity.h), through a real L2Cascade against a real fs
// directory and a real redis-server: lookups are answered from the server's record (a file
// removed behind the server's back is still "found", its load misses and the record heals), they
// lock in the wrapper so that neither eviction nor CLEAR takes a key a load is about to read, and
// a resp adapter rebuilds its record from Redis itself (SCAN) after a restart.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <filesystem>
#include <thread>

#include "connectors/connector_registry.h"
#include "server/l2_cascade.h"
#include "support/redis_process.h"
#include "unit/connectors/connector_test_util.h"

namespace kvtier {
namespace {

using namespace kvtier::testing;

constexpr size_t kValue = 64 << 10;
const auto kKeys = Keys(8);
const auto kValues = Values(8, kValue);

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/kvt-l2excl-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

std::unique_ptr<L2Cascade> Cascade(MetricsRegistry& metrics, const std::string& json) {
  auto l2 = L2Cascade::Create({json}, ConnectorRegistry::WithBuiltins(), metrics);
  EXPECT_TRUE(l2.ok()) << l2.status().ToString();
  return l2.ok() ? std::move(l2).value() : nullptr;
}

std::string FsExclusive(const TempDir& d, const std::string& extra = "") {
  return R"({"type":"fs","path":")" + d.path + R"(","exclusive":true)" + extra + "}";
}

size_t Store(L2Cascade& l2, size_t first, size_t n) {
  std::vector<std::string> keys(kKeys.begin() + first, kKeys.begin() + first + n);
  std::vector<ConstBuffer> src;
  for (size_t i = first; i < first + n; ++i) src.push_back({kValues[i].data(), kValue});
  return l2.Submit(0, ConnectorOp::kWrite, [&](Connector& c) { return c.SubmitWrite(keys, src); })
      .get()
      .Hits();
}

// Lookup of keys [0, n); they stay locked unless `unlock`.
std::vector<uint8_t> Lookup(L2Cascade& l2, size_t n, bool unlock = true) {
  std::vector<std::string> keys(kKeys.begin(), kKeys.begin() + n);
  Completion c =
      l2.Submit(0, ConnectorOp::kLookup, [&](Connector& x) { return x.SubmitLookup(keys); }).get();
  EXPECT_TRUE(c.status.ok()) << c.status.ToString();
  if (unlock) l2.adapter(0).Unlock(keys);
  return c.results;
}

std::vector<uint8_t> Bits(std::initializer_list<int> bits) {
  return std::vector<uint8_t>(bits.begin(), bits.end());
}

TEST(L2ExclusiveTest, LookupsComeFromTheRecordAndALoadThatMissesHealsIt) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsExclusive(dir));
  ASSERT_EQ(Store(*l2, 0, 3), 3u);
  EXPECT_EQ(Lookup(*l2, 4), Bits({1, 1, 1, 0}));
  const L2Capacity::Usage u = l2->adapter(0).usage();
  EXPECT_TRUE(u.accounted);  // exclusive keeps a record even without max_bytes
  EXPECT_EQ(u.objects, 3u);
  EXPECT_EQ(u.capacity_bytes, 0u);
  EXPECT_EQ(l2->Status()[0]["stored_objects"], 3);
  const OpCounters lookups = l2->adapter(0).Stats().ops[0];
  EXPECT_EQ(lookups.tasks, 1u);
  EXPECT_EQ(lookups.keys, 4u);
  EXPECT_EQ(lookups.hits, 3u);

  // Someone else empties the directory: the record still says the keys are there, so only the
  // load finds out. It misses (nothing wrong is ever returned), and the record forgets them.
  size_t removed = 0;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir.path)) {
    if (e.is_regular_file()) files.push_back(e.path());
  }
  ASSERT_EQ(files.size(), 3u);
  for (const auto& f : files) removed += std::filesystem::remove(f);
  ASSERT_EQ(removed, 3u);
  EXPECT_EQ(Lookup(*l2, 3), Bits({1, 1, 1}));
  std::vector<std::vector<uint8_t>> out(3, std::vector<uint8_t>(kValue));
  std::vector<std::string> keys(kKeys.begin(), kKeys.begin() + 3);
  std::vector<MutableBuffer> dst;
  for (auto& o : out) dst.push_back({o.data(), kValue});
  Completion ld = l2->Submit(0, ConnectorOp::kLoad, [&](Connector& c) {
                      return c.SubmitLoad(keys, dst);
                    }).get();
  EXPECT_TRUE(ld.status.ok()) << ld.status.ToString();
  EXPECT_EQ(ld.Hits(), 0u);
  EXPECT_EQ(Lookup(*l2, 3), Bits({0, 0, 0}));
  EXPECT_EQ(l2->adapter(0).usage().objects, 0u);
}

TEST(L2ExclusiveTest, ALookupOnTheCallersThreadComesFromTheRecordToo) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsExclusive(dir));
  ASSERT_EQ(Store(*l2, 0, 2), 2u);
  std::vector<std::string> keys(kKeys.begin(), kKeys.begin() + 3);
  auto now = l2->LookupNow(0, keys);  // no backend connection needed: never refused
  ASSERT_TRUE(now.has_value());
  EXPECT_EQ(now->results, Bits({1, 1, 0}));
  EXPECT_TRUE(l2->adapter(0).Locked(kKeys[0]));
  EXPECT_TRUE(l2->adapter(0).Drain(ConnectorOp::kLookup).empty());  // returned, not queued
  const OpCounters lookups = l2->adapter(0).Stats().ops[0];
  EXPECT_EQ(lookups.tasks, 1u);
  EXPECT_EQ(lookups.hits, 2u);
  l2->adapter(0).Unlock(keys);
  EXPECT_FALSE(l2->adapter(0).Locked(kKeys[0]));
}

TEST(L2ExclusiveTest, ALockedKeyIsSparedByEvictionAndByClear) {
  TempDir dir;
  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, FsExclusive(dir, R"(,"max_bytes":)" + std::to_string(2 * kValue)));
  ASSERT_EQ(Store(*l2, 0, 2), 2u);
  EXPECT_EQ(Lookup(*l2, 1, /*unlock=*/false), Bits({1}));  // key 0 locked, and now the newest
  EXPECT_TRUE(l2->adapter(0).Locked(kKeys[0]));
  EXPECT_EQ(l2->adapter(0).Stats().locked_keys, 1u);
  // Two more: LRU would take key 1 then key 0; key 0 is locked, so 1 and 2 go.
  ASSERT_EQ(Store(*l2, 2, 2), 2u);
  EXPECT_EQ(Lookup(*l2, 4), Bits({1, 0, 0, 1}));
  // CLEAR skips the locked key and reports only what it removed.
  EXPECT_EQ(l2->Clear(), 1u);
  EXPECT_EQ(Lookup(*l2, 4), Bits({1, 0, 0, 0}));
  l2->adapter(0).Unlock(std::vector<std::string>{kKeys[0]});
  EXPECT_FALSE(l2->adapter(0).Locked(kKeys[0]));
  EXPECT_EQ(l2->Clear(), 1u);
  EXPECT_EQ(Lookup(*l2, 4), Bits({0, 0, 0, 0}));
  EXPECT_EQ(l2->adapter(0).usage().objects, 0u);
}

TEST(L2ExclusiveTest, ExclusiveMustBeABoolean) {
  TempDir dir;
  MetricsRegistry metrics;
  auto bad = L2Cascade::Create({R"({"type":"fs","path":")" + dir.path + R"(","exclusive":1})"},
                               ConnectorRegistry::WithBuiltins(), metrics);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("exclusive must be true or false"), std::string::npos)
      << bad.status().message();
}

TEST(L2ExclusiveTest, RedisListsWhatItHoldsSoARestartedServerFindsItAgain) {
  auto redis = RedisProcess::Start();
  ASSERT_NE(redis, nullptr);
  const std::string adapter = R"({"type":"resp","host":"127.0.0.1","exclusive":true,"port":)" +
                              std::to_string(redis->port());
  {
    MetricsRegistry metrics;
    auto l2 = Cascade(metrics, adapter + "}");
    ASSERT_EQ(Store(*l2, 0, 5), 5u);
  }
  // Other data in the same database is not kvtier's and is left out of the listing.
  redisContext* c = redisConnect("127.0.0.1", redis->port());
  ASSERT_TRUE(c != nullptr && c->err == 0);
  freeReplyObject(redisCommand(c, "SET %s %s", "not-a-cache-key", "x"));
  redisFree(c);

  MetricsRegistry metrics;
  auto l2 = Cascade(metrics, adapter + "}");
  EXPECT_EQ(l2->adapter(0).usage().objects, 5u);
  EXPECT_EQ(l2->adapter(0).usage().bytes, 5 * kValue);
  EXPECT_EQ(Lookup(*l2, 6), Bits({1, 1, 1, 1, 1, 0}));
  l2.reset();

  // With a smaller max_bytes the listing is trimmed at once.
  MetricsRegistry m2;
  auto small = Cascade(m2, adapter + R"(,"max_bytes":)" + std::to_string(2 * kValue) + "}");
  EXPECT_EQ(small->adapter(0).usage().objects, 2u);
  size_t found = 0;
  for (uint8_t r : Lookup(*small, 5)) found += r;
  EXPECT_EQ(found, 2u);
}

}  // namespace
}  // namespace kvtier
