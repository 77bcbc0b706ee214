// `kvtier bench master` runs end to end: a master is filled, the mixed phases run for each thread
// count, every read of a filled key hits, and the report carries every number. No timing
// thresholds: only that it ran and answered right.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/kvtier_cli.h"

namespace kvtier::testing {
namespace {

TEST(BenchMasterCli, FillsTheMasterAndReportsEveryNumber) {
  const CliOutput o =
      RunKvtier("bench master --objects 5000 --seconds 0.3 --threads 1,2 --json", 120);
  ASSERT_EQ(o.status, 0) << o.err;
  const nlohmann::json j = nlohmann::json::parse(o.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << o.out;
  EXPECT_EQ(j["objects"], 5000);
  EXPECT_EQ(j["wrong_answers"], 0);
  EXPECT_GT(j["ping_p50_us"].get<double>(), 0);
  EXPECT_GT(j["fill_key_ops_per_s"].get<double>(), 0);
  EXPECT_GT(j["rss_after_bytes"].get<double>(), j["rss_before_bytes"].get<double>());
  ASSERT_EQ(j["mixed"].size(), 2u);
  for (const nlohmann::json& m : j["mixed"]) {
    EXPECT_GT(m["batches"].get<uint64_t>(), 0u);
    EXPECT_GT(m["key_ops_per_s"].get<double>(), 0);
    for (const char* kind : {"get_replicas", "exist"}) EXPECT_GT(m[kind]["p99_us"], 0) << kind;
    // Beside it, from the same run: the raw round trip at that concurrency and the CPU split.
    EXPECT_GT(m["raw_rtt_p50_us"].get<double>(), 0);
    EXPECT_GE(m["raw_rtt_p99_us"].get<double>(), m["raw_rtt_p50_us"].get<double>());
    EXPECT_GT(m["master_cpu_us_per_key_op"].get<double>(), 0);
    EXPECT_GT(m["client_cpu_us_per_key_op"].get<double>(), 0);
    EXPECT_GE(m["other_processes_cores"].get<double>(), 0);
  }
  const CliOutput bad = RunKvtier("bench master --objects 0");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("--objects"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace kvtier::testing
