// The cache server's Redis L2 going away under load, and Redis frozen (slower than its deadline).
#include <signal.h>

#include <gtest/gtest.h>

#include <atomic>

#include "fault/server_fault_fixture.h"
#include "support/redis_process.h"

namespace kvtier::fault {
namespace {

using testing::kPromptChunks;
using testing::RedisProcess;
using testing::Worker;

std::string RespAdapter(const RedisProcess& r, int deadline_ms) {
  return R"({"type":"resp","host":"127.0.0.1","port":)" + std::to_string(r.port()) +
         R"(,"deadline_ms":)" + std::to_string(deadline_ms) + "}";
}

constexpr const char* kUpSeries = R"(kvtier_l2_adapter_up{adapter="resp#0"})";

// Prompt `cached` only in Redis (L1 emptied) and prompt `resident` in L1 and Redis.
void StoreOneInRedisOneInL1(FaultServer& s, CacheClient& c, Worker& w, uint32_t cached,
                            uint32_t resident) {
  ASSERT_EQ(StoreChecksummed(c, w, cached), 4);
  ASSERT_TRUE(WaitUntil([&] { return s.L2Count(0, "write", "hit_keys") >= 4; }));
  testing::ClearL1(c);
  ASSERT_EQ(StoreChecksummed(c, w, resident), 4);
  ASSERT_TRUE(WaitUntil([&] { return s.L2Count(0, "write", "hit_keys") >= 8; }));
}

// Stores new prompts (one every 200 ms) until one reaches the adapter: the server found the
// backend again by itself. Then a fresh prompt `probe` is stored and waited for; false if any of
// it did not reach the adapter within 30 s.
bool StoreUntilL2IsUsedAgain(FaultServer& s, CacheClient& c, Worker& w, uint32_t probe) {
  uint64_t before = s.L2Count(0, "write", "hit_keys");
  uint32_t next = probe + 1;
  if (!WaitUntil([&] {
        EXPECT_EQ(StoreChecksummed(c, w, next++), 4);
        std::this_thread::sleep_for(milliseconds(200));
        return s.L2Count(0, "write", "hit_keys") >= before + 4;
      })) {
    return false;
  }
  before = s.L2Count(0, "write", "hit_keys");
  EXPECT_EQ(StoreChecksummed(c, w, probe), 4);
  return WaitUntil([&] { return s.L2Count(0, "write", "hit_keys") >= before + 4; });
}

// A second engine worker keeps storing prompts and reading them back while the faults happen,
// and now and then looks up a prompt nobody stored (a miss that asks L2).
class Load {
 public:
  Load(FaultServer& s, milliseconds bound) : client_(s.Client()), bound_(bound) {
    thread_ = std::thread([this] { Run(); });
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  uint64_t rounds() const { return rounds_; }
  milliseconds slowest() const { return milliseconds(slowest_ms_.load()); }

 private:
  void Run() {
    Worker w(*client_, 2);
    ASSERT_TRUE(w.status.ok());
    for (uint32_t p = 5000; !stop_; ++p) {
      auto t = Clock::now();
      EXPECT_EQ(StoreChecksummed(*client_, w, p), 4);
      Note(Since(t));
      t = Clock::now();
      EXPECT_EQ(FetchChecksummed(*client_, w, p, "load-" + std::to_string(p)), kPromptChunks);
      Note(Since(t));
      if (p % 4 == 0) {
        t = Clock::now();
        EXPECT_EQ(FetchChecksummed(*client_, w, 900000 + p, "load-miss-" + std::to_string(p)),
                  0);
        Note(Since(t));
      }
      ++rounds_;
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  void Note(milliseconds took) {
    EXPECT_LT(took, bound_) << "a request of the load took too long";
    slowest_ms_ = std::max<int64_t>(slowest_ms_, took.count());
  }

  std::unique_ptr<CacheClient> client_;
  milliseconds bound_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rounds_{0};
  std::atomic<int64_t> slowest_ms_{0};
  std::thread thread_;
};

// Redis stopped under load: the server keeps answering (L1 hits served, L2 lookups are misses
// within the deadline) and reports the adapter down; once redis-server is back on its port,
// stores and loads go through it again by themselves. No read is ever corrupt.
TEST(ServerRedisOutage, StoppedUnderLoadThenRestartedOnItsPortIsUsedAgain) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  constexpr int kDeadlineMs = 1000;
  const milliseconds bound(kDeadlineMs + 5000);  // deadline, its grace second, a busy VM
  FaultServer server({"--l2-adapter", RespAdapter(*redis, kDeadlineMs)});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StoreOneInRedisOneInL1(server, *client, w, 1, 2);
  ASSERT_EQ(server.Metric(kUpSeries), 1);

  Load load(server, bound);
  ASSERT_TRUE(WaitUntil([&] { return load.rounds() >= 5; }));
  redis->Stop();

  auto t = Clock::now();
  EXPECT_EQ(FetchChecksummed(*client, w, 2, "l1-while-down"), kPromptChunks);
  EXPECT_EQ(FetchChecksummed(*client, w, 1, "l2-while-down"), 0);
  EXPECT_LT(Since(t), bound);
  ASSERT_TRUE(WaitUntil([&] { return server.Metric(kUpSeries) == 0; })) << server.Http("/status");
  EXPECT_FALSE(server.L2Up(0));
  const uint64_t rounds_down = load.rounds();
  ASSERT_TRUE(WaitUntil([&] { return load.rounds() >= rounds_down + 5; }))
      << "the load stalled while Redis was down";

  ASSERT_TRUE(redis->Restart());  // same port, empty
  ASSERT_TRUE(StoreUntilL2IsUsedAgain(server, *client, w, 100)) << server.Http("/status");
  EXPECT_TRUE(WaitUntil([&] { return server.Metric(kUpSeries) == 1; }));
  load.Stop();
  std::printf("[ fault    ] load rounds %llu, slowest request %lld ms (bound %lld ms)\n",
              static_cast<unsigned long long>(load.rounds()),
              static_cast<long long>(load.slowest().count()),
              static_cast<long long>(bound.count()));

  // Loads from Redis too: with L1 empty the last prompt comes back from the restarted server.
  testing::ClearL1(*client);
  const uint64_t retrieved = server.L2Count(0, "load", "hit_keys");
  EXPECT_EQ(FetchChecksummed(*client, w, 100, "from-restarted-redis"), kPromptChunks);
  EXPECT_EQ(server.L2Count(0, "load", "hit_keys"), retrieved + 4);
}

// A backend slower than its deadline (redis-server frozen with SIGSTOP): lookups return within
// the deadline plus slack as misses, L1 keeps serving; after SIGCONT the server uses Redis again.
TEST(ServerRedisOutage, FrozenRedisIsAMissWithinTheDeadlineThenRecovers) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  constexpr int kDeadlineMs = 300;
  const milliseconds bound(kDeadlineMs + 4000);  // deadline, its grace second, a busy VM
  FaultServer server({"--l2-adapter", RespAdapter(*redis, kDeadlineMs)});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StoreOneInRedisOneInL1(server, *client, w, 1, 2);

  ASSERT_EQ(::kill(redis->pid(), SIGSTOP), 0);
  auto t = Clock::now();
  EXPECT_EQ(FetchChecksummed(*client, w, 1, "l2-frozen"), 0);
  const milliseconds miss = Since(t);
  EXPECT_LT(miss, bound);
  t = Clock::now();
  EXPECT_EQ(FetchChecksummed(*client, w, 2, "l1-frozen"), kPromptChunks);
  EXPECT_EQ(StoreChecksummed(*client, w, 3), 4);  // STORE never waits for L2
  const milliseconds l1 = Since(t);
  EXPECT_LT(l1, bound);
  ASSERT_TRUE(WaitUntil([&] { return server.Metric(kUpSeries) == 0; })) << server.Http("/status");
  t = Clock::now();
  EXPECT_EQ(FetchChecksummed(*client, w, 1, "l2-frozen-again"), 0);
  const milliseconds miss_down = Since(t);
  EXPECT_LT(miss_down, bound);
  EXPECT_TRUE(client->Ping().ok());
  std::printf("[ fault    ] frozen Redis, deadline %d ms: L2 miss %lld ms, L1 hit + store %lld "
              "ms, miss once marked down %lld ms\n",
              kDeadlineMs, static_cast<long long>(miss.count()),
              static_cast<long long>(l1.count()), static_cast<long long>(miss_down.count()));

  ASSERT_EQ(::kill(redis->pid(), SIGCONT), 0);
  ASSERT_TRUE(StoreUntilL2IsUsedAgain(server, *client, w, 100)) << server.Http("/status");
  EXPECT_TRUE(WaitUntil([&] { return server.Metric(kUpSeries) == 1; }));
  // Late replies to the timed-out requests must not be taken for answers to new ones: what Redis
  // held all along comes back intact, and so does whatever of prompt 3 reached it.
  testing::ClearL1(*client);
  EXPECT_EQ(FetchChecksummed(*client, w, 1, "after-thaw"), kPromptChunks);
  EXPECT_EQ(FetchChecksummed(*client, w, 100, "stored-after-thaw"), kPromptChunks);
  EXPECT_GE(FetchChecksummed(*client, w, 3, "stored-while-frozen"), 0);
}

}  // namespace
}  // namespace kvtier::fault
