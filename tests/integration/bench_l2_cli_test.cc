// `kvtier bench l2` as a user runs it: small mem configs end to end (the JSON report has every
// field, the text report compares two configs), and bad options are clear errors. No timing
// thresholds: only that things ran, were verified and were cleaned up.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "support/kvtier_cli.h"
#include "support/redis_process.h"

namespace kvtier::testing {
namespace {

using nlohmann::json;

using Output = CliOutput;

// Runs `kvtier bench l2 <args>`.
Output BenchL2(const std::string& args) { return RunKvtier("bench l2 " + args); }

constexpr const char* kSmall = "--keys 16 --value-size 4KiB --stores-per-round 4 --lookup-batch 4";

TEST(BenchL2Cli, MemRunPrintsEveryNumberAsJson) {
  Output o = BenchL2(std::string("--adapter '{\"type\":\"mem\",\"num_workers\":2}' ") + kSmall +
                     " --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["config"]["keys"], 16);
  EXPECT_EQ(j["config"]["value_bytes"], 4096);
  EXPECT_EQ(j["config"]["rounds"], 4);  // keys / stores-per-round
  EXPECT_GT(j["limits"]["memcpy_1mib_gbps"]["median"].get<double>(), 0);
  ASSERT_EQ(j["adapters"].size(), 1u);
  const json& a = j["adapters"][0];
  EXPECT_EQ(a["config"]["type"], "mem");
  EXPECT_EQ(a["pools"], "shared pool, 2 threads");
  // Phase 1: every key stored in single-key tasks; at least one probe pair per round after the
  // first, each lookup finding all of its keys.
  EXPECT_EQ(a["phase1"]["store"]["count"], 16);
  EXPECT_GE(a["phase1"]["probes"].get<int>(), 3);
  EXPECT_EQ(a["phase1"]["lookup"]["count"], a["phase1"]["probes"]);
  EXPECT_EQ(a["phase1"]["lookup"]["keys"], a["phase1"]["probes"].get<int>() * 4);
  EXPECT_EQ(a["phase1"]["load"]["bytes"], a["phase1"]["probes"].get<int>() * 4096);
  for (const char* op : {"lookup", "load", "store"}) {
    for (const char* f : {"avg_us", "p50_us", "p99_us", "max_us", "connector_p50_us"}) {
      EXPECT_TRUE(a["phase1"][op].contains(f)) << op << " " << f;
    }
  }
  // Phase 2: every byte stored and loaded back, and verified.
  EXPECT_EQ(a["phase2"]["store"]["bytes"], 16 * 4096);
  EXPECT_EQ(a["phase2"]["load"]["bytes"], 16 * 4096);
  EXPECT_GT(a["phase2"]["load"]["gbps"].get<double>(), 0);
  EXPECT_GE(a["verified_bytes"].get<int>(), 16 * 4096);
  // Both phases' keys removed again.
  EXPECT_EQ(a["remove"]["keys"], 32);
  // mem has no backend limit; the ratios to memcpy are still there.
  EXPECT_FALSE(a["limit"]["unavailable"].get<std::string>().empty());
  EXPECT_TRUE(a["ratios"]["load_over_limit"].is_null());
  EXPECT_TRUE(a["ratios"]["load_over_memcpy"].is_number());
  EXPECT_TRUE(a["errors"].empty());
  EXPECT_FALSE(j.contains("comparison"));
}

TEST(BenchL2Cli, FsRunMeasuresRawFileLimitsInTheSameDirectory) {
  const std::string dir = ::testing::TempDir() + "/bench-l2-fs";
  std::filesystem::remove_all(dir);
  Output o = BenchL2("--adapter '{\"type\":\"fs\",\"path\":\"" + dir + "\"}' " + kSmall +
                     " --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  const json& a = j["adapters"][0];
  EXPECT_TRUE(a["ok"].get<bool>()) << a["errors"];
  const json& l = a["limit"];
  EXPECT_EQ(l["unavailable"], "") << l;
  EXPECT_GT(l["load_gbps"].get<double>(), 0);
  EXPECT_GT(l["store_gbps"].get<double>(), 0);
  EXPECT_EQ(l["details"]["files"], 16);  // as many files as keys, up to 256 MiB
  EXPECT_EQ(l["details"]["bytes_per_file"], 4096);
  EXPECT_TRUE(a["ratios"]["load_over_limit"].is_number());
  EXPECT_EQ(a["remove"]["keys"], 32);
  // The raw files are gone, and so is every object the bench stored (only directories remain).
  size_t files = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    files += e.is_regular_file() ? 1 : 0;
  }
  EXPECT_EQ(files, 0u);
  std::filesystem::remove_all(dir);
}

// The bench wraps adapters as the server does: an exclusive fs adapter's lookups come from the
// record, and every probe still finds what was stored and loads it byte for byte.
TEST(BenchL2Cli, AnExclusiveAdapterIsBenchedThroughTheServersWrapper) {
  const std::string dir = ::testing::TempDir() + "/bench-l2-fs-exclusive";
  std::filesystem::remove_all(dir);
  Output o = BenchL2("--adapter '{\"type\":\"fs\",\"exclusive\":true,\"path\":\"" + dir +
                     "\"}' " + kSmall + " --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  const json& a = j["adapters"][0];
  EXPECT_TRUE(a["ok"].get<bool>()) << a["errors"];
  EXPECT_GT(a["phase1"]["lookup"]["count"].get<uint64_t>(), 0u);
  EXPECT_GT(a["verified_bytes"].get<uint64_t>(), 0u);
  std::filesystem::remove_all(dir);
}

// Keys in the server's current database (-1 when it cannot be asked).
long long DbSize(uint16_t port) {
  redisContext* c = redisConnect("127.0.0.1", port);
  long long n = -1;
  if (c != nullptr && c->err == 0) {
    if (auto* r = static_cast<redisReply*>(redisCommand(c, "DBSIZE"))) {
      if (r->type == REDIS_REPLY_INTEGER) n = r->integer;
      freeReplyObject(r);
    }
  }
  if (c != nullptr) redisFree(c);
  return n;
}

TEST(BenchL2Cli, RespComparesPoolsAgainstRedisBenchmarkAndLeavesNothingBehind) {
  auto redis = RedisProcess::Start();
  ASSERT_TRUE(redis);
  const std::string port = std::to_string(redis->port());
  // The old key spellings (num_workers, per_op_workers, retrieve, store): still accepted.
  Output o = BenchL2("--adapter '{\"type\":\"resp\",\"port\":" + port +
                     ",\"num_workers\":2}' --adapter '{\"type\":\"resp\",\"port\":" + port +
                     ",\"per_op_workers\":{\"lookup\":1,\"retrieve\":1,\"store\":2}}' " +
                     kSmall + " --json");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  const json j = json::parse(o.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << o.out;
  ASSERT_EQ(j["adapters"].size(), 2u);
  for (const json& a : j["adapters"]) {
    EXPECT_TRUE(a["ok"].get<bool>()) << a["errors"];
    EXPECT_EQ(a["phase2"]["load"]["bytes"], 16 * 4096);
    const json& l = a["limit"];
    if (::access("/usr/bin/redis-benchmark", X_OK) != 0) {
      EXPECT_NE(l["unavailable"].get<std::string>().find("redis-benchmark"), std::string::npos);
      continue;
    }
    EXPECT_EQ(l["unavailable"], "") << l;
    EXPECT_GT(l["details"]["GET"]["rps"].get<double>(), 0);
    EXPECT_TRUE(a["ratios"]["load_over_limit"].is_number());
  }
  // redis-benchmark runs with as many connections as the op's pool has threads.
  EXPECT_EQ(j["adapters"][0]["limit"]["details"]["get_clients"], 2);
  EXPECT_EQ(j["adapters"][1]["limit"]["details"]["get_clients"], 1);
  EXPECT_EQ(j["adapters"][1]["limit"]["details"]["set_clients"], 2);
  EXPECT_EQ(j["comparison"]["labels"][0], "shared");
  EXPECT_EQ(j["comparison"]["labels"][1], "per-op");
  EXPECT_TRUE(j["comparison"]["lookup_p99_ms"][1].is_number());
  // The bench's keys and redis-benchmark's key are all gone.
  EXPECT_EQ(DbSize(redis->port()), 0);
}

TEST(BenchL2Cli, TwoConfigsAreComparedInOneRun) {
  // A value size that is not a multiple of 8 also exercises the tail of the data pattern.
  Output o = BenchL2(
      "--adapter '{\"type\":\"mem\",\"num_threads\":2,\"delay_ms\":1}' "
      "--adapter '{\"type\":\"mem\",\"delay_ms\":1,"
      "\"per_op_threads\":{\"lookup\":1,\"load\":1,\"write\":2}}' "
      "--keys 12 --value-size 1001 --stores-per-round 3 --lookup-batch 2 --inflight 3");
  ASSERT_EQ(o.status, 0) << o.err << o.out;
  for (const char* text : {"adapter 1:", "adapter 2:", "pools: shared pool, 2 threads",
                           "pools: per-op lookup 1, load 1, write 2; shared 4 (remove)",
                           "lookup p99: ", "backend limit: unavailable", "result: OK"}) {
    EXPECT_NE(o.out.find(text), std::string::npos) << text << "\n" << o.out;
  }
}

TEST(BenchL2Cli, BadAdapterIsAClearError) {
  struct Case {
    std::string args, says;
  } cases[] = {
      {"--adapter '{not json'", "--adapter #1: not valid JSON"},
      {"--adapter '{\"num_workers\":2}'", "--adapter #1: missing 'type'"},
      {"--adapter '{\"type\":\"mem\"}' --adapter '{\"type\":\"mem\",\"num_workers\":0}'",
       "--adapter #2: num_workers must be"},
      {"--adapter '{\"type\":\"nosuch\"}'", "nosuch"},
      {"--adapter '{\"type\":\"mem\",\"bogus\":1}'", "unknown key 'bogus'"},
      {"--adapter '{\"type\":\"mem\",\"per_op_workers\":{\"lookups\":1}}'", "lookups"},
      {"--adapter '{\"type\":\"mem\"}' --value-size 12XB", "--value-size"},
      {"--adapter '{\"type\":\"mem\"}' --keys 2 --stores-per-round 4", "--stores-per-round"},
      {"--adapter '{\"type\":\"mem\"}' --keys 8 --rounds 3 --stores-per-round 4", "--rounds"},
      {"--adapter '{\"type\":\"mem\"}' --adapter '{\"type\":\"mem\"}' --adapter "
       "'{\"type\":\"mem\"}'",
       "twice"},
  };
  for (const Case& c : cases) {
    Output o = BenchL2(c.args);
    EXPECT_NE(o.status, 0) << c.args;
    EXPECT_NE(o.err.find(c.says), std::string::npos) << c.args << "\nstderr: " << o.err;
    EXPECT_EQ(o.err.find("Segmentation"), std::string::npos) << o.err;
    // The server's flag has no place in bench l2's errors.
    EXPECT_EQ(o.err.find("--l2-adapter"), std::string::npos) << o.err;
    EXPECT_TRUE(o.out.empty()) << c.args << "\nstdout: " << o.out;
  }
  Output missing = BenchL2("--keys 8");
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("--adapter"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace kvtier::testing
