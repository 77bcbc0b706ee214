// `kvtier bench store --quick --json` as CI runs it: every section is in the report with positive
// numbers, every byte was verified, and bad options are clear errors. No timing thresholds: only
// that things ran, moved what they should and came back right.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "support/kvtier_cli.h"

namespace kvtier::testing {
namespace {

using nlohmann::json;

using Output = CliOutput;

// Runs `kvtier bench store <args>`.
Output BenchStore(const std::string& args) { return RunKvtier("bench store " + args); }

double Num(const json& j) { return j.is_number() ? j.get<double>() : -1; }

// A put/get section moved (trials + 1 warm-up) x values and verified them (the scaling steps
// split the values between their processes, rounding up).
void ExpectSection(const json& s, const std::string& name, const json& config) {
  SCOPED_TRACE(name);
  ASSERT_TRUE(s.is_object()) << name;
  EXPECT_EQ(s["unavailable"], "");
  EXPECT_TRUE(s["errors"].empty()) << s["errors"];
  EXPECT_TRUE(s["verified"].get<bool>());
  const uint64_t processes = s["processes"].get<uint64_t>();
  const uint64_t values = (config["values"].get<uint64_t>() + processes - 1) / processes;
  const uint64_t trials = config["trials"].get<uint64_t>();
  const uint64_t value_bytes = config["value_bytes"].get<uint64_t>();
  const uint64_t batch = config["batch"].get<uint64_t>();
  EXPECT_EQ(s["verified_bytes"].get<uint64_t>(), (trials + 1) * values * value_bytes * processes);
  for (const char* op : {"put", "get"}) {
    SCOPED_TRACE(op);
    const json& o = s[op];
    EXPECT_GT(Num(o["gbps"]["median"]), 0);
    EXPECT_GT(Num(o["gbps"]["min"]), 0);
    EXPECT_GT(Num(o["p50_ms"]), 0);
    EXPECT_GE(Num(o["p99_ms"]), Num(o["p50_ms"]));
    EXPECT_EQ(o["bytes"].get<uint64_t>(), trials * values * value_bytes * processes);
    EXPECT_EQ(o["batches"].get<uint64_t>(), trials * ((values + batch - 1) / batch) * processes);
  }
  if (s.contains("ratios")) {
    EXPECT_GT(Num(s["ratios"]["put_over_limit"]), 0);
    EXPECT_GT(Num(s["ratios"]["get_over_limit"]), 0);
  }
}

TEST(BenchStoreCli, QuickRunReportsEverySectionVerified) {
  Output o = BenchStore("--quick --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_TRUE(j["errors"].empty()) << j["errors"];
  const json& c = j["config"];
  EXPECT_TRUE(c["quick"].get<bool>());
  EXPECT_EQ(c["trials"], 1);
  EXPECT_GT(Num(j["limits"]["memcpy_1mib_gbps"]["median"]), 0);
  EXPECT_GT(Num(j["limits"]["raw_tcp_gbps"]["median"]), 0);
  EXPECT_EQ(j["limits"]["raw_tcp_error"], "");

  ExpectSection(j["same_node"], "same_node", c);
  EXPECT_EQ(j["same_node"]["limit"]["name"], "memcpy");
  ExpectSection(j["cross_node"], "cross_node", c);
  EXPECT_EQ(j["cross_node"]["limit"]["name"], "raw_tcp");
  if (::access("/usr/bin/redis-server", X_OK) == 0) {
    ExpectSection(j["redis"], "redis", c);
    for (const char* k : {"same_node_put", "same_node_get", "cross_node_put", "cross_node_get"}) {
      EXPECT_GT(Num(j["vs_redis"][k]), 0) << k;
    }
  } else {
    EXPECT_FALSE(j["redis"]["unavailable"].get<std::string>().empty());
  }
  ASSERT_EQ(j["scaling"].size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(j["scaling"][i]["processes"].get<uint64_t>(), uint64_t{1} << i);
    ExpectSection(j["scaling"][i], "scaling " + std::to_string(i), c);
  }

  const json& m = j["master_exist"];
  EXPECT_TRUE(m["verified"].get<bool>()) << m["errors"];
  EXPECT_EQ(m["wrong_answers"], 0);
  EXPECT_GT(m["checked_keys"].get<uint64_t>(), 0u);
  EXPECT_EQ(m["present_keys"], c["values"]);
  ASSERT_EQ(m["runs"].size(), 2u);
  EXPECT_EQ(m["runs"][0]["threads"], 1);
  EXPECT_EQ(m["runs"][1]["threads"], 4);
  for (const json& r : m["runs"]) {
    EXPECT_GT(r["calls"].get<uint64_t>(), 0u);
    EXPECT_GT(Num(r["calls_per_s"]), 0);
    EXPECT_GT(Num(r["keys_per_s"]), Num(r["calls_per_s"]));
    EXPECT_GT(Num(r["p50_us"]), 0);
  }
  // Every goal is judged (a number and a verdict), whether met or not.
  ASSERT_GE(j["goals"].size(), 4u);
  for (const json& g : j["goals"]) {
    EXPECT_GT(Num(g["value"]), 0) << g;
    EXPECT_TRUE(g["met"].is_boolean()) << g;
  }
}

TEST(BenchStoreCli, TextReportShowsTheTableAndGoals) {
  Output o = BenchStore("--quick --values 8 --trials 1 --exist-seconds 0.1");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  for (const char* want : {"same-node dummy (A)", "cross-node dummy (P->A)", "4 dummies on A",
                           "master Exist", "goals:", "verified: every byte"}) {
    EXPECT_NE(o.out.find(want), std::string::npos) << want << "\n" << o.out;
  }
}

TEST(BenchStoreCli, SectionsRunOnlyWhatIsSelected) {
  Output o = BenchStore("--quick --sections cross-node --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  ExpectSection(j["cross_node"], "cross_node", j["config"]);
  for (const char* s : {"same_node", "redis", "redis_unpipelined", "master_exist"}) {
    EXPECT_EQ(j[s]["unavailable"], "not selected (--sections)") << s;
  }
  EXPECT_TRUE(j["scaling"].empty());
  ASSERT_EQ(j["goals"].size(), 2u);  // cross-node put and get against raw TCP
}

TEST(BenchStoreCli, BadOptionsAreClearErrors) {
  Output o = BenchStore("--value-size 12");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("--value-size must be a multiple of 8"), std::string::npos) << o.err;
  o = BenchStore("--value-size 1PB");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("--value-size"), std::string::npos) << o.err;
  EXPECT_TRUE(o.out.empty()) << o.out;
  o = BenchStore("--sections same-node,disk");
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("unknown section 'disk'"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace kvtier::testing
