// `kvtier bench store --quick --json` as CI runs it: every section is in the report with positive
// numbers, every byte was verified, and bad options are clear errors. No timing thresholds: only
// that things ran, moved what they should and came back right.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
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

// The metadata section: every row of both clients and the master measured `metadata_calls` times,
// next to both raw round trips, every answer right.
void ExpectMetadata(const json& m, const json& config) {
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["unavailable"], "");
  EXPECT_TRUE(m["verified"].get<bool>()) << m["errors"];
  EXPECT_TRUE(m["errors"].empty()) << m["errors"];
  EXPECT_EQ(m["wrong_answers"], 0);
  EXPECT_GT(m["checked_answers"].get<uint64_t>(), 0u);
  EXPECT_EQ(m["calls"], config["metadata_calls"]);
  EXPECT_EQ(m["value_bytes"], 64);
  for (const char* raw : {"tcp", "unix"}) {
    SCOPED_TRACE(raw);
    EXPECT_GT(Num(m["raw"][raw]["p50_us"]), 0);
    EXPECT_GE(Num(m["raw"][raw]["p99_us"]), Num(m["raw"][raw]["p50_us"]));
    EXPECT_EQ(m["raw"][raw]["run_p50_us"].size(), 2u);  // before and after the clients
  }
  std::set<std::string> rows;
  for (const json& r : m["rows"]) {
    const std::string name = r["client"].get<std::string>() + " " + r["op"].get<std::string>() +
                             " " + std::to_string(r["keys"].get<uint32_t>());
    SCOPED_TRACE(name);
    rows.insert(name);
    EXPECT_EQ(r["calls"], config["metadata_calls"]);
    EXPECT_GT(Num(r["p50_us"]), 0);
    EXPECT_GE(Num(r["p99_us"]), Num(r["p50_us"]));
    EXPECT_GT(Num(r["p50_over_raw_tcp"]), 0);
  }
  std::set<std::string> want;
  for (const char* client : {"dummy", "embedded"}) {
    for (const char* row :
         {"exists 1", "exists 32", "get-size 1", "put 1", "put 32", "remove 1", "remove 32"}) {
      want.insert(std::string(client) + " " + row);
    }
  }
  for (const char* row : {"put-start 1", "put-start 32", "put-end 1", "put-end 32"}) {
    want.insert(std::string("master ") + row);
  }
  EXPECT_EQ(rows, want);
  EXPECT_EQ(m["rows"].size(), want.size());
}

// The lookup-l2 section: seven rows of `lookup_calls` LOOKUPs with the right hits, and counters
// showing that every absent-prompt LOOKUP on the store-L2 server was an L2 lookup that reached
// the master (one exist call each: one L2 task per LOOKUP, one master call per task).
void ExpectLookupL2(const json& m, const json& config) {
  ASSERT_TRUE(m.is_object());
  EXPECT_EQ(m["unavailable"], "");
  EXPECT_TRUE(m["verified"].get<bool>()) << m["errors"];
  EXPECT_TRUE(m["errors"].empty()) << m["errors"];
  EXPECT_EQ(m["calls"], config["lookup_calls"]);
  EXPECT_GT(Num(m["raw_tcp"]["p50_us"]), 0);
  EXPECT_EQ(m["raw_tcp"]["run_p50_us"].size(), 2u);
  std::set<std::string> ids;
  for (const json& r : m["rows"]) {
    const std::string id = r["id"].get<std::string>();
    SCOPED_TRACE(id);
    ids.insert(id);
    EXPECT_EQ(r["calls"], config["lookup_calls"]);
    EXPECT_EQ(r["wrong_hits"], 0);
    EXPECT_EQ(r["hit_chunks"].get<uint64_t>(), id == "c" ? m["chunks"].get<uint64_t>() : 0u);
    EXPECT_GT(Num(r["total_us"]["p50"]), 0);
    EXPECT_GE(Num(r["total_us"]["p99"]), Num(r["total_us"]["p50"]));
    if (id.ends_with("-pipe")) {  // the ack comes with the hit count: not timed apart
      EXPECT_TRUE(r["ack_us"]["p50"].is_null());
    } else {
      EXPECT_GT(Num(r["ack_us"]["p50"]), 0);
      EXPECT_GE(Num(r["ack_us"]["p99"]), Num(r["ack_us"]["p50"]));
      EXPECT_GE(Num(r["total_us"]["p50"]), Num(r["ack_us"]["p50"]));
    }
    EXPECT_EQ(r["polls_per_call"].is_number(), id.ends_with("-spin"));
  }
  EXPECT_EQ(ids,
            (std::set<std::string>{"a", "b", "c", "a-spin", "b-spin", "a-pipe", "b-pipe"}));
  for (const char* x : {"p50_us", "over_raw_tcp_p50", "spin_p50_us", "pipe_p50_us"}) {
    EXPECT_TRUE(m["l2_extra"][x].is_number()) << x;
  }
  const json& e = m["evidence"];
  const uint64_t lookups = e["absent_lookups_on_store_l2"].get<uint64_t>();
  // Rows b, b-spin and b-pipe, warm-up rounds included.
  EXPECT_EQ(lookups, 3 * (m["calls"].get<uint64_t>() + m["warmup_calls"].get<uint64_t>()));
  EXPECT_EQ(e["l1_only_server_adapters"], 0);
  EXPECT_EQ(e["l2_lookup_tasks"].get<double>(), static_cast<double>(lookups));
  EXPECT_EQ(e["l2_lookup_failed_tasks"].get<double>(), 0);
  EXPECT_EQ(e["l2_lookup_keys"].get<double>(),
            static_cast<double>(lookups * m["chunks"].get<uint64_t>()));
  EXPECT_EQ(e["master_exist_calls"].get<double>(), static_cast<double>(lookups));
  EXPECT_GT(Num(e["l2_lookup_task_mean_us"]), 0);
  EXPECT_GT(Num(e["master_exist_mean_us"]), 0);
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
  ExpectMetadata(j["metadata"], c);
  EXPECT_EQ(c["metadata_calls"], 100);  // kQuickMetadataCalls
  ExpectLookupL2(j["lookup_l2"], c);
  EXPECT_EQ(c["lookup_calls"], 100);  // kQuickLookupCalls
  // Every goal is judged (a number and a verdict), whether met or not: 4 against the limits,
  // 4 against redis when it ran, 2 of the metadata section, 1 of lookup-l2 (a difference of two
  // latencies over the raw round trip, so any number, even one below 0 on a noisy machine).
  ASSERT_GE(j["goals"].size(), 7u);
  for (const json& g : j["goals"]) {
    if (g["goal"].get<std::string>().starts_with("LOOKUP via store L2")) {
      EXPECT_TRUE(g["value"].is_number()) << g;
    } else {
      EXPECT_GT(Num(g["value"]), 0) << g;
    }
    EXPECT_TRUE(g["met"].is_boolean()) << g;
  }
}

TEST(BenchStoreCli, TextReportShowsTheTableAndGoals) {
  Output o = BenchStore("--quick --values 8 --trials 1 --exist-seconds 0.1");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  for (const char* want :
       {"same-node dummy (A)", "cross-node dummy (P->A)", "4 dummies on A", "master Exist",
        "metadata calls", "tcp ping", "embedded  exists", "exists(32) p50 <= 2.5x raw TCP RTT",
        "cache-server LOOKUP, L1-only vs store L2", "b-spin", "store L2 reached:",
        "LOOKUP via store L2 - L1-only, p50 <= 1x raw TCP RTT", "goals:",
        "verified: every byte"}) {
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
  for (const char* s :
       {"same_node", "redis", "redis_unpipelined", "master_exist", "metadata", "lookup_l2"}) {
    EXPECT_EQ(j[s]["unavailable"], "not selected (--sections)") << s;
  }
  EXPECT_TRUE(j["scaling"].empty());
  ASSERT_EQ(j["goals"].size(), 2u);  // cross-node put and get against raw TCP
}

// Only the metadata section: no throughput limits, no segment warm-up, a small segment.
TEST(BenchStoreCli, MetadataSectionAlone) {
  Output o = BenchStore("--quick --sections metadata --metadata-calls 20 --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(j["verified"].get<bool>());
  ExpectMetadata(j["metadata"], j["config"]);
  EXPECT_EQ(Num(j["limits"]["memcpy_1mib_gbps"]["median"]), 0);
  EXPECT_EQ(j["segment_warmup"]["bytes"], 0);
  EXPECT_FALSE(j["wall_s"].contains("segment_warmup"));
  for (const char* s : {"same_node", "cross_node", "redis", "master_exist", "lookup_l2"}) {
    EXPECT_EQ(j[s]["unavailable"], "not selected (--sections)") << s;
  }
  ASSERT_EQ(j["goals"].size(), 2u);  // embedded and dummy exists(32) against raw TCP
  for (const json& g : j["goals"]) {
    EXPECT_GT(Num(g["value"]), 0) << g;
    EXPECT_TRUE(g["met"].is_boolean()) << g;
  }
}

// Only the lookup-l2 section: two cache servers beside the store, a few rounds.
TEST(BenchStoreCli, LookupL2SectionAlone) {
  Output o = BenchStore("--quick --sections lookup-l2 --lookup-calls 20 --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(j["verified"].get<bool>());
  ExpectLookupL2(j["lookup_l2"], j["config"]);
  EXPECT_EQ(j["config"]["lookup_calls"], 20);
  EXPECT_EQ(j["metadata"]["unavailable"], "not selected (--sections)");
  ASSERT_EQ(j["goals"].size(), 1u);
  EXPECT_TRUE(j["goals"][0]["value"].is_number()) << j["goals"][0];
  EXPECT_TRUE(j["goals"][0]["met"].is_boolean());
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
  o = BenchStore("--lookup-calls 0");
  EXPECT_NE(o.status, 0);
  EXPECT_NE(o.err.find("--lookup-calls"), std::string::npos) << o.err;
}

}  // namespace
}  // namespace kvtier::testing
