// One client flooding the cache server, and the per-client in-flight limit that keeps the others
// served (--max-inflight-per-client, docs/protocol.md section 1).
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

std::string SessionBody(const std::string& request_id) {
  wire::SessionRequest r;
  r.request_id = request_id;
  return EncodeBody(r);
}

// With N LOOKUP jobs of one client still running (Redis frozen under them), its next LOOKUP is
// refused at once with BUSY and a message naming the limit; cheap requests and other clients are
// not; once the jobs are done the client may LOOKUP again.
TEST(ServerInflightLimit, TheRequestOverTheLimitIsRefusedAtOnceWithBusy) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  FaultServer server({"--max-inflight-per-client", "4", "--l2-adapter",
                      R"({"type":"resp","host":"127.0.0.1","deadline_ms":60000,"port":)" +
                          std::to_string(redis->port()) + "}"});
  auto other = server.Client();
  Worker w(*other, 1);  // a registered model, so LOOKUP jobs ask L2
  ASSERT_TRUE(w.status.ok());

  RawClient raw(server.port());
  ASSERT_TRUE(raw.Hello().ok());
  ASSERT_EQ(::kill(redis->pid(), SIGSTOP), 0);
  for (uint32_t i = 0; i < 4; ++i) {
    raw.Send(wire::RequestType::kLookup, RawClient::LookupBody("held-" + std::to_string(i), i));
    auto r = raw.Receive(seconds(10));
    ASSERT_TRUE(r && r->status.ok()) << (r ? r->status.ToString() : "no reply");
  }
  raw.Send(wire::RequestType::kLookup, RawClient::LookupBody("one-too-many", 9));
  auto refused = raw.Receive(seconds(10));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status.code(), Code::kBusy) << refused->status.ToString();
  EXPECT_NE(refused->status.message().find("client 'fault-raw' ("), std::string::npos)
      << refused->status.message();
  EXPECT_NE(refused->status.message().find(
                "has 4 requests in flight (limit --max-inflight-per-client 4)"),
            std::string::npos)
      << refused->status.message();
  EXPECT_EQ(server.Metric("kvtier_inflight_refused_total"), 1);

  // Asking how the held jobs are doing is never refused; the jobs are still running.
  raw.Send(wire::RequestType::kQueryPrefetchStatus, SessionBody("held-0"));
  auto query = raw.Receive(seconds(10));
  ASSERT_TRUE(query);
  EXPECT_TRUE(query->status.ok()) << query->status.ToString();
  raw.Send(wire::RequestType::kPing, wire::BodyWriter().Finish());
  auto ping = raw.Receive(seconds(10));
  ASSERT_TRUE(ping && ping->status.ok());
  // Another client has its own budget.
  wire::PrefixKey k;
  k.model = "test-model";
  k.request_id = "other";
  k.tokens = testing::Tokens(testing::kPromptTokens, 20);
  EXPECT_TRUE(other->Lookup(k).ok());

  ASSERT_EQ(::kill(redis->pid(), SIGCONT), 0);
  for (uint32_t i = 0; i < 4; ++i) {
    auto hits = other->WaitPrefetch("held-" + std::to_string(i));
    ASSERT_TRUE(hits.ok()) << hits.status().ToString();
    EXPECT_EQ(*hits, 0u);
  }
  // Every slot was given back before the results were published.
  for (uint32_t i = 0; i < 4; ++i) {
    raw.Send(wire::RequestType::kLookup, RawClient::LookupBody("again-" + std::to_string(i), i));
  }
  for (uint32_t i = 0; i < 4; ++i) {
    auto r = raw.Receive(seconds(10));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->status.ok()) << r->status.ToString();
  }
  EXPECT_EQ(server.Metric("kvtier_inflight_refused_total"), 1);
}

// One client floods LOOKUPs whose jobs wait on a slow L2 while another engine's lookups must go
// on: those are answered within a bound, and the flooder gets BUSY replies at once, not a hang.
TEST(ServerFlood, AFloodOfLookupsFromOneClientDoesNotStarveAnother) {
  // Each LOOKUP job that misses L1 waits 10 ms per key in the adapter: without a limit, seconds
  // of queue for every few hundred of them.
  FaultServer server({"--l2-adapter", R"({"type":"mem","delay_ms":10,"deadline_ms":10000})"});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  ASSERT_EQ(StoreChecksummed(*client, w, 1), 4);

  std::atomic<bool> done{false};
  std::atomic<uint64_t> accepted{0}, busy{0}, other{0};
  std::atomic<int64_t> slowest_reply_ms{0};
  std::string busy_message;
  std::thread flooder([&] {
    RawClient raw(server.port());
    ASSERT_TRUE(raw.Hello().ok());
    for (uint32_t round = 0; !done; ++round) {
      constexpr uint32_t kBurst = 500;
      for (uint32_t i = 0; i < kBurst; ++i) {
        const uint32_t n = round * kBurst + i;
        raw.Send(wire::RequestType::kLookup,
                 RawClient::LookupBody("flood-" + std::to_string(n), 100000 + n));
      }
      auto start = Clock::now();
      for (uint32_t i = 0; i < kBurst; ++i) {
        auto r = raw.Receive(seconds(20));
        ASSERT_TRUE(r) << "the flooder got no reply: the server hangs it";
        if (r->status.ok()) {
          ++accepted;
        } else if (r->status.code() == Code::kBusy) {
          if (busy++ == 0) busy_message = r->status.message();
        } else {
          ++other;
        }
        slowest_reply_ms = std::max<int64_t>(slowest_reply_ms, Since(start).count());
      }
    }
  });

  // The other engine: LOOKUP + RETRIEVE of its prompt (all in L1), again and again.
  ASSERT_TRUE(WaitUntil([&] { return busy > 0 || accepted >= 64; }));
  const milliseconds bound(8000);
  milliseconds slowest(0);
  for (int i = 0; i < 6; ++i) {
    auto t = Clock::now();
    EXPECT_EQ(FetchChecksummed(*client, w, 1, "steady-" + std::to_string(i)), kPromptChunks);
    slowest = std::max(slowest, Since(t));
    EXPECT_LT(Since(t), bound) << "lookup " << i << " starved by the flood";
  }
  done = true;
  flooder.join();
  std::printf("[ fault    ] flood: %llu LOOKUPs accepted, %llu BUSY, %llu other; the other "
              "client's slowest lookup+retrieve %lld ms; flooder's slowest reply %lld ms\n",
              static_cast<unsigned long long>(accepted.load()),
              static_cast<unsigned long long>(busy.load()),
              static_cast<unsigned long long>(other.load()),
              static_cast<long long>(slowest.count()),
              static_cast<long long>(slowest_reply_ms.load()));
  EXPECT_GT(busy, 0u);
  EXPECT_EQ(other, 0u);
  EXPECT_NE(busy_message.find("(limit --max-inflight-per-client 64)"), std::string::npos)
      << busy_message;
  EXPECT_EQ(server.Metric("kvtier_inflight_refused_total"), static_cast<double>(busy));
  EXPECT_TRUE(client->Ping().ok());
}

}  // namespace
}  // namespace kvtier::fault
