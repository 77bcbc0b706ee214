// The L2 tier through a real server: chunks written by STORE reach the adapters in the
// background, and a LOOKUP that misses L1 prefetches them back so RETRIEVE returns the same
// bytes. Real fs directories, a real redis-server, kill -9, corrupted files, a backend that
// dies and comes back, one that is slower than its deadline.
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "common/process/readiness.h"
#include "prompt_round_trip.h"
#include "server_process.h"
#include "support/redis_process.h"
#include "worker_fixture.h"

namespace kvtier::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using std::chrono::seconds;

std::vector<std::string> Args(std::initializer_list<std::string> adapters,
                              std::vector<std::string> more = {}) {
  std::vector<std::string> a = {"--chunk-size", std::to_string(kChunkTokens)};
  for (const auto& j : adapters) a.insert(a.end(), {"--l2-adapter", j});
  a.insert(a.end(), more.begin(), more.end());
  return a;
}

nlohmann::json ServerStatus(const ServerProcess& s) {
  httplib::Client c("127.0.0.1", s.http_port());
  auto r = c.Get("/status");
  if (!r || r->status != 200) return nlohmann::json::object();
  return nlohmann::json::parse(r->body);
}

// The adapter's counter `field` of operation `op` ("write", "lookup", "load"), from /status.
uint64_t L2Count(const ServerProcess& s, size_t adapter, const char* op, const char* field) {
  auto j = ServerStatus(s);
  if (!j.contains("l2") || j["l2"].size() <= adapter) return 0;
  return j["l2"][adapter][op][field].get<uint64_t>();
}

bool WaitUntil(const std::function<bool()>& done, seconds limit = seconds(30)) {
  return process::WaitFor(done, limit, milliseconds(50));
}

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/kvtier-l2-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string FsAdapter(const std::string& extra = "") const {
    return R"({"type":"fs","path":")" + path.string() + "\"" + extra + "}";
  }
  std::vector<fs::path> Objects() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(path)) {
      if (e.is_regular_file() && e.path().filename().string()[0] != '.') out.push_back(e.path());
    }
    return out;
  }
};

std::string RespAdapter(const RedisProcess& r, const std::string& extra = "") {
  return R"({"type":"resp","host":"127.0.0.1","port":)" + std::to_string(r.port()) + extra + "}";
}

TEST(L2Tier, ChunksComeBackFromL2AfterL1IsCleared) {
  ServerProcess server(Args({R"({"type":"mem"})"}));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StorePrompt(*client, w, 7);
  ASSERT_TRUE(WaitUntil([&] { return L2Count(server, 0, "write", "hit_keys") >= 4; }));
  ClearL1(*client);

  EXPECT_EQ(FetchAndCheck(*client, w, 7, "again"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l2"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l1"), 0);
  // Now back in L1: the next lookup is an L1 hit, and nothing was written back to L2.
  EXPECT_EQ(FetchAndCheck(*client, w, 7, "third"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l1"), kPromptChunks);
  EXPECT_EQ(L2Count(server, 0, "write", "keys"), 4u);
  EXPECT_EQ(L2Count(server, 0, "lookup", "hit_keys"), 4u);  // one L2 lookup, four keys
  // An unknown prompt is a plain miss.
  EXPECT_EQ(FetchAndCheck(*client, w, 999, "unknown"), 0);
}

TEST(L2Tier, TwoRanksArePrefetchedTogether) {
  ServerProcess server(Args({R"({"type":"mem"})"}));
  auto client = server.Client();
  Worker r0(*client, 1, 2, 0), r1(*client, 2, 2, 1);
  ASSERT_TRUE(r0.status.ok() && r1.status.ok());
  StorePrompt(*client, r0, 11);
  StorePrompt(*client, r1, 11, 12);  // rank 1 holds other bytes for the same tokens
  ASSERT_TRUE(WaitUntil([&] { return L2Count(server, 0, "write", "hit_keys") >= 8; }));
  ClearL1(*client);
  ASSERT_EQ(LookupHits(*client, "both", Tokens(kPromptTokens, 11), 2), kPromptChunks);
  for (auto* w : {&r0, &r1}) {
    w->Zero();
    auto rt = client->Retrieve(w->Request(Tokens(kPromptTokens, 11), Blocks(0, 16), "both"));
    ASSERT_TRUE(rt.ok());
    EXPECT_EQ(rt->retrieved_chunks, 4u);
    EXPECT_EQ(w->Mismatches(Blocks(0, 16), 0, kPromptTokens, w == &r0 ? 11 : 12), 0u);
  }
}

TEST(L2Tier, FsAndRedisCascadeServeWhatL1Evicted) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  TempDir dir;
  // 1 MiB of L1 holds 64 objects; 30 prompts are 120.
  ServerProcess server(Args({dir.FsAdapter(), RespAdapter(*redis)},
                            {"--l1-size-gb", "0.0009765625"}));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  // Every chunk L1 took reaches both adapters (a STORE may skip chunks while L1 is full of
  // objects pinned for slow adapters; those never existed).
  ASSERT_EQ(StorePrompt(*client, w, 100), 4u);
  uint64_t stored = 4;
  for (uint32_t seed = 101; seed < 130; ++seed) stored += StorePrompt(*client, w, seed);
  ASSERT_TRUE(WaitUntil([&] {
    return L2Count(server, 0, "write", "hit_keys") >= stored &&
           L2Count(server, 1, "write", "hit_keys") >= stored;
  })) << stored << " " << ServerStatus(server).dump();
  EXPECT_EQ(dir.Objects().size(), stored);
  // 120 chunks went through room for 64: L1 evicted (or, while the adapters were slow and held
  // pins, skipped) most of them.
  EXPECT_LT(Stat(*client, "l1_objects"), 65);

  // The oldest prompt left L1 long ago (and the rest goes now): it comes back from fs, the
  // first adapter of the cascade.
  ClearL1(*client);
  EXPECT_EQ(FetchAndCheck(*client, w, 100, "old"), kPromptChunks);
  EXPECT_EQ(L2Count(server, 0, "load", "hit_keys"), 4u);

  // A second server that only has the Redis adapter finds the same chunks there.
  ServerProcess other(Args({RespAdapter(*redis)}));
  auto client2 = other.Client();
  Worker w2(*client2, 1);
  ASSERT_TRUE(w2.status.ok());
  EXPECT_EQ(FetchAndCheck(*client2, w2, 100, "from-redis"), kPromptChunks);
  EXPECT_EQ(L2Count(other, 0, "load", "hit_keys"), 4u);
}

TEST(L2Tier, RedisDownMeansFailuresCountedAndFsStillServesThenRedisIsUsedAgain) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  TempDir dir;
  ServerProcess server(Args({dir.FsAdapter(), RespAdapter(*redis, R"(,"deadline_ms":1000)")}));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StorePrompt(*client, w, 1);
  ASSERT_TRUE(WaitUntil([&] { return L2Count(server, 1, "write", "hit_keys") >= 4; }));

  redis->Kill();
  StorePrompt(*client, w, 2);  // STORE itself never waits for L2
  ASSERT_TRUE(WaitUntil([&] { return L2Count(server, 1, "write", "failed_tasks") >= 1; }));
  auto status = ServerStatus(server);
  EXPECT_FALSE(status["l2"][1]["up"].get<bool>()) << status.dump();
  EXPECT_TRUE(status["l2"][0]["up"].get<bool>());

  // L1 and fs keep serving while Redis is gone.
  ClearL1(*client);
  EXPECT_EQ(FetchAndCheck(*client, w, 2, "fs-2"), kPromptChunks);
  EXPECT_EQ(FetchAndCheck(*client, w, 1, "fs-1"), kPromptChunks);

  // Redis returns (empty): new stores reach it again without touching the server.
  ASSERT_TRUE(redis->Restart());
  uint32_t seed = 1000;
  const uint64_t before = L2Count(server, 1, "write", "hit_keys");
  ASSERT_TRUE(WaitUntil([&] {
    StorePrompt(*client, w, ++seed);
    return L2Count(server, 1, "write", "hit_keys") > before;
  })) << ServerStatus(server).dump();
  EXPECT_TRUE(WaitUntil([&] { return ServerStatus(server)["l2"][1]["up"].get<bool>(); }));
  ASSERT_TRUE(WaitUntil([&] { return L2Count(server, 1, "write", "hit_keys") >= before + 4; }));

  ServerProcess redis_only(Args({RespAdapter(*redis)}));
  auto client2 = redis_only.Client();
  Worker w2(*client2, 1);
  ASSERT_TRUE(w2.status.ok());
  EXPECT_EQ(FetchAndCheck(*client2, w2, seed, "after-restart"), kPromptChunks);
}

TEST(L2Tier, FsContentSurvivesKill9OfTheServer) {
  TempDir dir;
  {
    ServerProcess first(Args({dir.FsAdapter()}));
    auto client = first.Client();
    Worker w(*client, 1);
    ASSERT_TRUE(w.status.ok());
    for (uint32_t seed = 20; seed < 23; ++seed) StorePrompt(*client, w, seed);
    ASSERT_TRUE(WaitUntil([&] { return L2Count(first, 0, "write", "hit_keys") >= 12; }));
    first.Kill();
  }
  ServerProcess second(Args({dir.FsAdapter()}));
  auto client = second.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  for (uint32_t seed = 20; seed < 23; ++seed) {
    EXPECT_EQ(FetchAndCheck(*client, w, seed, "after-crash-" + std::to_string(seed)),
              kPromptChunks);
  }
}

// `exclusive`: lookups come from the server's record, rebuilt from the directory after a kill -9;
// a file removed behind the server's back is still "found" by the lookup, but its load misses,
// nothing wrong is returned, and the record forgets it.
TEST(L2Tier, AnExclusiveFsAdapterAnswersFromItsRecordAcrossARestart) {
  TempDir dir;
  const std::string adapter = dir.FsAdapter(R"(,"exclusive":true)");
  {
    ServerProcess first(Args({adapter}));
    auto client = first.Client();
    Worker w(*client, 1);
    ASSERT_TRUE(w.status.ok());
    StorePrompt(*client, w, 30);
    StorePrompt(*client, w, 31);
    ASSERT_TRUE(WaitUntil([&] { return L2Count(first, 0, "write", "hit_keys") >= 8; }));
    first.Kill();
  }
  ServerProcess second(Args({adapter}));
  auto client = second.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  EXPECT_EQ(ServerStatus(second)["l2"][0]["stored_objects"], 8);
  auto files = dir.Objects();
  ASSERT_EQ(files.size(), 8u);
  fs::remove(files[0]);
  const int64_t served =
      FetchAndCheck(*client, w, 30, "x-30") + FetchAndCheck(*client, w, 31, "x-31");
  EXPECT_LT(served, 2 * kPromptChunks);
  EXPECT_GE(served, kPromptChunks);
  EXPECT_EQ(ServerStatus(second)["l2"][0]["stored_objects"], 7);
}

TEST(L2Tier, AFlippedByteInAnFsFileIsAMissNotGarbage) {
  TempDir dir;
  ServerProcess server(Args({dir.FsAdapter()}));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StorePrompt(*client, w, 5);
  ASSERT_TRUE(WaitUntil([&] { return L2Count(server, 0, "write", "hit_keys") >= 4; }));
  ClearL1(*client);
  auto files = dir.Objects();
  ASSERT_EQ(files.size(), 4u);
  {
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  // Whichever chunk that was, the chunks before it are hits and nothing wrong is returned
  // (FetchAndCheck compares every retrieved byte); the bad file is gone.
  EXPECT_LT(FetchAndCheck(*client, w, 5, "flipped"), kPromptChunks);
  EXPECT_FALSE(fs::exists(files[0]));
  EXPECT_EQ(dir.Objects().size(), 3u);
}

TEST(L2Tier, ABackendSlowerThanItsDeadlineIsAMissNotAHang) {
  ServerProcess server(
      Args({R"({"type":"mem","delay_ms":20000,"deadline_ms":200})"}, {"--log-level", "off"}));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StorePrompt(*client, w, 3);
  ASSERT_TRUE(WaitUntil([&] { return L2Count(server, 0, "write", "failed_tasks") >= 1; }));
  ClearL1(*client);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(FetchAndCheck(*client, w, 3, "slow"), 0);
  // Bounded by the 200 ms deadline (plus backoff), far from the 20 s the backend would take.
  EXPECT_LT(std::chrono::steady_clock::now() - start, seconds(10));
  EXPECT_TRUE(client->Ping().ok());
}

TEST(L2Tier, SkipL1PolicyDropsChunksFromL1OnceInL2) {
  ServerProcess server(Args({R"({"type":"mem"})"}, {"--l2-store-policy", "skip_l1"}));
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StorePrompt(*client, w, 9);
  ASSERT_TRUE(WaitUntil([&] { return Stat(*client, "l1_objects") == 0; }));
  EXPECT_EQ(FetchAndCheck(*client, w, 9, "skip"), kPromptChunks);
  EXPECT_EQ(Stat(*client, "lookup_hit_chunks_l2"), kPromptChunks);
}

}  // namespace
}  // namespace kvtier::testing
