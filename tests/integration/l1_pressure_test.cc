// L1 under memory pressure, through the server: eviction by bytes, pins that protect objects
// until their TTL expires, stores that skip (never block) when nothing can be evicted.
#include <gtest/gtest.h>
#include <httplib.h>

#include <thread>

#include "server_process.h"
#include "support/eventually.h"
#include "worker_fixture.h"

namespace kvtier::testing {
namespace {

double Stat(CacheClient& c, const std::string& name) {
  auto s = c.Stats();
  EXPECT_TRUE(s.ok());
  for (const auto& [k, v] : *s) {
    if (k == name) return v;
  }
  ADD_FAILURE() << "no stat " << name;
  return -1;
}

// Objects are 16 KiB (2 layers x K/V x 4 blocks x 1 KiB); 1 MiB of L1 holds 64 of them.
const std::vector<std::string> kSmallL1 = {"--chunk-size", "64", "--l1-size-gb", "0.0009765625"};

uint64_t StoreRounds(CacheClient& client, Worker& w, uint32_t first_seed, uint32_t rounds) {
  uint64_t skipped = 0;
  for (uint32_t i = 0; i < rounds; ++i) {
    w.Fill(Blocks(0, 16), 256, first_seed + i);
    auto st = client.Store(w.Request(Tokens(256, first_seed + i), Blocks(0, 16)));
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (st.ok()) skipped += st->skipped_chunks;
  }
  return skipped;
}

TEST(L1Pressure, EvictsOldestByBytesAndKeepsRecent) {
  ServerProcess server(kSmallL1);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StoreRounds(*client, w, 1000, 40);  // 160 chunks into room for 64
  EXPECT_GT(Stat(*client, "l1_evictions"), 0);
  EXPECT_LE(Stat(*client, "l1_used_bytes"), Stat(*client, "l1_capacity_bytes"));

  // The newest prompt survived, byte for byte; the oldest was evicted.
  w.Zero();
  auto rt = client->Retrieve(w.Request(Tokens(256, 1039), Blocks(0, 16)));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->retrieved_chunks, 4u);
  EXPECT_EQ(w.Mismatches(Blocks(0, 16), 0, 256, 1039), 0u);
  rt = client->Retrieve(w.Request(Tokens(256, 1000), Blocks(0, 16)));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->retrieved_chunks, 0u);
}

TEST(L1Pressure, PinnedChunksSurviveUntilTheirTtl) {
  auto args = kSmallL1;
  args.insert(args.end(), {"--pin-ttl-s", "1"});
  ServerProcess server(args);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StoreRounds(*client, w, 1, 1);
  ASSERT_EQ(LookupHits(*client, "pinned", Tokens(256, 1)), 4);

  // Fill L1 several times over: the pinned (and oldest) chunks must stay.
  StoreRounds(*client, w, 2000, 40);
  EXPECT_GT(Stat(*client, "l1_evictions"), 0);
  auto probe = client->Retrieve(w.Request(Tokens(256, 1), Blocks(0, 16)));
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->retrieved_chunks, 4u);

  // Our retrieve consumed the lookup's pins. Pin again, then leave the pins unreleased (as a
  // crashed engine would): the server's clock expires them after the 1 s TTL (the exact moment
  // is tested in-process on a FakeClock); polled through STATS, which reads no pin away.
  ASSERT_EQ(LookupHits(*client, "pinned", Tokens(256, 1)), 4);
  EXPECT_GT(Stat(*client, "l1_pinned_objects"), 0);
  ASSERT_TRUE(testing::Eventually([&] { return Stat(*client, "l1_pinned_objects") == 0; },
                                  std::chrono::seconds(20)))
      << "the pins never expired";
  StoreRounds(*client, w, 3000, 40);
  probe = client->Retrieve(w.Request(Tokens(256, 1), Blocks(0, 16)));
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->retrieved_chunks, 0u);
}

TEST(L1Pressure, S3FifoKeepsAReusedPrefixThroughAScanOfOneTimePrompts) {
  for (const char* policy : {"S3FIFO", "LRU"}) {
    auto args = kSmallL1;
    args.insert(args.end(), {"--eviction-policy", policy});
    ServerProcess server(args);
    auto client = server.Client();
    Worker w(*client, 1);
    ASSERT_TRUE(w.status.ok());
    StoreRounds(*client, w, 1, 1);  // the reused prefix: stored, then read twice
    for (int i = 0; i < 2; ++i) {
      auto rt = client->Retrieve(w.Request(Tokens(256, 1), Blocks(0, 16)));
      ASSERT_TRUE(rt.ok());
      ASSERT_EQ(rt->retrieved_chunks, 4u);
    }
    StoreRounds(*client, w, 5000, 40);  // 160 one-time chunks into room for 64
    EXPECT_GT(Stat(*client, "l1_evictions"), 0) << policy;
    w.Zero();
    auto rt = client->Retrieve(w.Request(Tokens(256, 1), Blocks(0, 16)));
    ASSERT_TRUE(rt.ok());
    if (std::string(policy) == "S3FIFO") {
      EXPECT_EQ(rt->retrieved_chunks, 4u);
      EXPECT_EQ(w.Mismatches(Blocks(0, 16), 0, 256, 1), 0u);
    } else {
      EXPECT_EQ(rt->retrieved_chunks, 0u);  // LRU: the oldest read went long ago
    }
  }
}

TEST(L1Pressure, NoopPolicySkipsStoresWhenFull) {
  auto args = kSmallL1;
  args.insert(args.end(), {"--eviction-policy", "noop"});
  ServerProcess server(args);
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  const uint64_t skipped = StoreRounds(*client, w, 1, 40);
  EXPECT_GT(skipped, 0u);
  EXPECT_GT(Stat(*client, "l1_alloc_failures"), 0);
  EXPECT_EQ(Stat(*client, "l1_evictions"), 0);
  // What was stored first is still there.
  w.Zero();
  auto rt = client->Retrieve(w.Request(Tokens(256, 1), Blocks(0, 16)));
  ASSERT_TRUE(rt.ok());
  EXPECT_EQ(rt->retrieved_chunks, 4u);
  EXPECT_EQ(w.Mismatches(Blocks(0, 16), 0, 256, 1), 0u);
}

TEST(L1Pressure, ClearKeepsPinnedAndDropsTheRest) {
  ServerProcess server({"--chunk-size", "64"});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StoreRounds(*client, w, 1, 2);
  ASSERT_EQ(LookupHits(*client, "keep", Tokens(256, 1)), 4);
  auto removed = client->Clear();
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->l1, 4u);
  EXPECT_EQ(removed->l2, 0u);
  EXPECT_EQ(Stat(*client, "l1_objects"), 4);
}

TEST(HttpAdmin, HealthStatusAndMetrics) {
  ServerProcess server({"--chunk-size", "64"});
  auto client = server.Client();
  Worker w(*client, 1);
  ASSERT_TRUE(w.status.ok());
  StoreRounds(*client, w, 1, 1);
  httplib::Client http("127.0.0.1", server.http_port());
  auto health = http.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto status = http.Get("/status");
  ASSERT_TRUE(status);
  EXPECT_NE(status->body.find("\"l1_objects\": 4"), std::string::npos) << status->body;
  EXPECT_NE(status->body.find("\"registered_workers\": 1"), std::string::npos);
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("kvtier_requests_total{status=\"OK\",type=\"STORE\"} 1"),
            std::string::npos)
      << metrics->body;
  EXPECT_NE(metrics->body.find("kvtier_request_seconds_bucket{type=\"STORE\",le=\"+Inf\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics->body.find("kvtier_l1_evictions_total"), std::string::npos);
}

}  // namespace
}  // namespace kvtier::testing
