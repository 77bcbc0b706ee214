// `kvtier bench master --nodes` runs end to end: for each node count a master is filled through
// simulated nodes, and the table (one row per count, a ratio row) and the JSON report carry every
// measure. No timing thresholds: only that each measure was taken and says what it should.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "support/kvtier_cli.h"
#include "support/temp_dir.h"

namespace kvtier::testing {
namespace {

TEST(BenchMasterNodesCli, MeasuresEachNodeCountAndPrintsItsRow) {
  ScratchDir dir("bench-master-nodes");
  ASSERT_FALSE(dir.path().empty());
  const std::string json_path = dir.path() + "/report.json";
  const CliOutput o = RunKvtier(
      "bench master --nodes 3,12 --objects 3000 --node-ttl-s 3 --ping-seconds 0.5 "
      "--placement-samples 50 --json-out " +
          json_path,
      240);
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  for (const char* row : {R"(\n\s+3\s+\d)", R"(\n\s+12\s+\d)", R"(\n\s+x12\s+[\d.]+x)"}) {
    EXPECT_TRUE(std::regex_search(o.out, std::regex(row))) << row << "\n" << o.out;
  }
  std::ifstream file(json_path);
  const nlohmann::json j = nlohmann::json::parse(file, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json_path;
  EXPECT_EQ(j["objects"], 3000);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["nodes"], 3);
  EXPECT_EQ(j["runs"][1]["nodes"], 12);
  for (const nlohmann::json& r : j["runs"]) {
    SCOPED_TRACE(r.dump());
    EXPECT_GT(r["cpu"]["cpu_per_ping_us"].get<double>(), 0);
    EXPECT_GT(r["cpu"]["pings_per_s"].get<double>(), 0);
    EXPECT_GT(r["cpu"]["repair_polls_per_s"].get<double>(), 0);
    EXPECT_EQ(r["placement"]["samples"], 50);
    EXPECT_GT(r["placement"]["p99_us"].get<double>(), 0);
    EXPECT_GT(r["eviction"]["objects_evicted"].get<double>(), 0);
    EXPECT_GT(r["eviction"]["until_evicted_ms"].get<double>(), 0);
    EXPECT_GT(r["rereplication"]["replicas_lost"].get<uint64_t>(), 0u);
    EXPECT_GE(r["rereplication"]["plan_ms"].get<double>(), 0);
    EXPECT_GE(r["rereplication"]["handed_out_s"].get<double>(), 0);
    // These nodes hold no bytes: the copies they are handed are refused.
    EXPECT_GT(r["rereplication"]["tasks_refused"].get<uint64_t>(), 0u);
    EXPECT_GT(r["fleet"]["pings_ok"].get<uint64_t>(), 0u);
    EXPECT_GT(r["rss_end_bytes"].get<uint64_t>(), 0u);
    EXPECT_GT(r["master_threads"].get<uint64_t>(), r["nodes"].get<uint64_t>());
  }
  const CliOutput bad = RunKvtier("bench master --nodes 1", 30);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--nodes"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kvtier::testing
