// MasterService /status JSON and Prometheus gauges/counters, and a concurrent mixed workload
// with Tick running alongside that must leave no space leaked.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "master_service_fixture.h"

namespace kvtier::store {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_F(MasterServiceTest, StatusJsonNumbers) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  ASSERT_TRUE(Mount("n2", 2, 2 << 20).ok());
  Put("n1", "a", 100);   // 128 bytes on segment 1
  Put("n2", "b", 1000);  // 1024 bytes on segment 2
  ASSERT_TRUE(Start("n2", "c", 64).ok());
  ASSERT_TRUE(Get("a").ok());
  EXPECT_EQ(GetCode("zz"), ErrorCode::OBJECT_NOT_FOUND);
  EXPECT_EQ(ErrorCodeOf(Start("n1", "a", 10).status()), ErrorCode::OBJECT_ALREADY_EXISTS);
  Advance(milliseconds(1500));
  ASSERT_FALSE(master_->Ping(Node("n2"))->need_remount);
  Advance(milliseconds(250));

  const nlohmann::json s = master_->StatusJson();
  EXPECT_EQ(s["capacity_bytes"], 3u << 20);
  EXPECT_EQ(s["allocated_bytes"], 128 + 1024 + 64);
  EXPECT_EQ(s["keys"], 3);
  EXPECT_EQ(s["unfinished_puts"], 1);
  EXPECT_EQ(s["nodes_alive"], 2);
  ASSERT_EQ(s["segments"].size(), 2u);
  EXPECT_EQ(s["segments"][0]["id"], 1);
  EXPECT_EQ(s["segments"][0]["node"], "n1");
  EXPECT_EQ(s["segments"][0]["endpoint"], Endpoint("n1"));
  EXPECT_EQ(s["segments"][0]["capacity_bytes"], 1u << 20);
  EXPECT_EQ(s["segments"][0]["used_bytes"], 128);
  EXPECT_EQ(s["segments"][1]["used_bytes"], 1024 + 64);
  ASSERT_EQ(s["nodes"].size(), 2u);
  EXPECT_EQ(s["nodes"][0]["id"], "n1");
  EXPECT_EQ(s["nodes"][0]["endpoint"], Endpoint("n1"));
  EXPECT_EQ(s["nodes"][0]["last_seen_ms_ago"], 1750);
  EXPECT_EQ(s["nodes"][1]["last_seen_ms_ago"], 250);
  const nlohmann::json& c = s["counters"];
  EXPECT_EQ(c["puts_ok"], 3);
  EXPECT_EQ(c["puts_exists"], 1);
  EXPECT_EQ(c["gets_hit"], 1);
  EXPECT_EQ(c["gets_miss"], 1);
  EXPECT_EQ(c["leases_granted"], 1);
  EXPECT_EQ(c["evictions"], 0);
}

TEST_F(MasterServiceTest, PrometheusGaugesAfterTick) {
  ASSERT_TRUE(Mount("n1", 1, 1 << 20).ok());
  Put("n1", "a", 100);
  Put("n1", "b", 100);
  master_->Tick();
  const std::string text = metrics_->RenderPrometheus();
  EXPECT_NE(text.find("kvtier_master_capacity_bytes 1048576"), std::string::npos) << text;
  EXPECT_NE(text.find("kvtier_master_allocated_bytes 256"), std::string::npos);
  EXPECT_NE(text.find("kvtier_master_keys 2"), std::string::npos);
  EXPECT_NE(text.find("kvtier_master_nodes_alive 1"), std::string::npos);
  EXPECT_NE(text.find("kvtier_master_segments 1"), std::string::npos);
  // Requests by op are counted by the RPC server (kvtier_master_rpc_requests_total), not here.
  EXPECT_EQ(text.find("kvtier_master_requests_total"), std::string::npos);
  EXPECT_NE(text.find("kvtier_master_puts_total{result=\"ok\"} 2"), std::string::npos);
}

TEST_F(MasterServiceTest, NullRegistryStillWorks) {
  MasterService own(MasterOptions{}, &clock_, nullptr);
  ASSERT_TRUE(own.MountSegment(Node("n1"), SegmentInfo{1, 4096, ""}).ok());
  EXPECT_TRUE(own.PutStart("n1", {"k"}, {10}, {})[0].ok());
  EXPECT_EQ(own.StatusJson()["counters"]["puts_ok"], 1);
}

TEST_F(MasterServiceTest, ConcurrentMixedWorkloadLeaksNothing) {
  MasterOptions options;
  options.eviction_high_watermark_ratio = 0.6;
  options.eviction_ratio = 0.1;
  Restart(options);
  ASSERT_TRUE(Mount("n0", 1, 64 << 10).ok());
  ASSERT_TRUE(Mount("n1", 2, 64 << 10).ok());
  std::atomic<bool> stop{false};
  std::thread ticker([&] {
    while (!stop.load()) {
      master_->Tick();
      Advance(milliseconds(50));
      ASSERT_TRUE(master_->Ping(Node("n0")).ok());
      ASSERT_TRUE(master_->Ping(Node("n1")).ok());
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < 4; ++t) {
    workers.emplace_back([&, t] {
      const std::string node = "n" + std::to_string(t % 2);
      PutConfig config;
      config.replicas = 1 + t % 2;
      for (int i = 0; i < 1500; ++i) {
        const std::string key = "k" + std::to_string((i * 7 + t) % 97);
        auto started = master_->PutStart(node, {key}, {uint64_t(100 + (i % 13) * 200)}, config);
        if (started[0].ok()) {
          if (i % 5 == 0) {
            (void)master_->PutRevoke(node, {key});
          } else if (i % 11 != 0) {  // some puts are left unfinished
            (void)master_->PutEnd(node, {key});
          }
        }
        (void)master_->GetReplicas({key});
        (void)master_->Exist({key});
        if (i % 3 == 0) (void)master_->Remove({key});
        if (i == 700 && t == 0) {
          (void)master_->UnmountSegment("n1", 2);
          (void)Mount("n1", 2, 64 << 10);
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  stop = true;
  ticker.join();

  // Every lease, discard and release deadline passes; then everything can go.
  Advance(seconds(601));
  ASSERT_TRUE(master_->Ping(Node("n0")).ok());
  ASSERT_TRUE(master_->Ping(Node("n1")).ok());
  master_->Tick();
  ASSERT_TRUE(master_->RemoveAll().ok());
  const nlohmann::json s = master_->StatusJson();
  EXPECT_EQ(s["keys"], 0);
  EXPECT_EQ(s["allocated_bytes"], 0);
  EXPECT_EQ(s["discarded_bytes"], 0);
  EXPECT_EQ(s["segments"].size(), 2u);
}

}  // namespace
}  // namespace kvtier::store
