// `kvtier bench server --trace`: a Mooncake trace replayed against a spawned server. The hits
// must be exactly the reuse the trace holds (worked out by hand here) when one worker replays it
// into an L1 that holds everything, every retrieved byte is verified by the bench, and a bad
// trace file is a clear error naming its line. No timing thresholds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "support/kvtier_cli.h"

namespace kvtier::testing {
namespace {

using nlohmann::json;

// Small objects: 16-token chunks, one chunk per trace block, 1 layer of 64 bytes per token.
constexpr const char* kSmall =
    "--chunk-size 16 --block-tokens 16 --trace-tokens-per-id 16 --layers 1 --bytes-per-token 64 "
    "--l1-size-gb 0.0625";

std::string Line(uint64_t ts, uint64_t input_length, const std::vector<int>& ids) {
  return json{{"timestamp", ts}, {"input_length", input_length}, {"output_length", 10},
              {"hash_ids", ids}}
      .dump();
}

std::string WriteTrace(const std::string& name, const std::vector<std::string>& lines) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream out(path);
  for (const std::string& l : lines) out << l << "\n";
  return path;
}

json RunJson(const std::string& args) {
  CliOutput o = RunKvtier("bench server --json " + args, 300);
  EXPECT_EQ(o.status, 0) << o.err << o.out;
  json j = json::parse(o.out, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << o.out << o.err;
  return j;
}

TEST(BenchTraceCli, OneWorkerHitsExactlyTheReuseTheTraceHolds) {
  const std::string trace = WriteTrace(
      "hand.jsonl", {Line(0, 3 * 512, {0, 1, 2}),
                     Line(5, 4 * 512, {0, 1, 3, 4}),       // shares 2 blocks with the first
                     Line(5, 20, {10}),                    // 20 tokens: under one chunk once scaled
                     Line(9, 512, {5}),                    // shares nothing
                     Line(12, 3 * 512 + 100, {0, 1, 2, 6}),  // shares 3; the partial 4th is dropped
                     Line(20, 2 * 512, {7, 8}),
                     Line(30, 3 * 512, {7, 8, 9})});       // shares 2
  const std::string plot = ::testing::TempDir() + "/hand.png";
  std::filesystem::remove(plot);
  const json j = RunJson(std::string(kSmall) + " --workers 1 --trace " + trace +
                         " --prefill-tokens-per-s 1000 --ttft-overhead-ms 10 --plot " + plot);
  EXPECT_TRUE(j["ok"].get<bool>()) << j["errors"];
  const json& t = j["trace"];
  EXPECT_EQ(t["requests"], 6);
  EXPECT_EQ(t["too_short"], 1);
  EXPECT_EQ(t["chunks"], 3 + 4 + 1 + 3 + 2 + 3);
  EXPECT_EQ(t["ideal_hits"], 2 + 3 + 2);
  EXPECT_EQ(t["distinct_chunks"], 16 - 7);
  const json& c = j["chunks"];
  EXPECT_EQ(c["lookup_hits"], 7);
  EXPECT_EQ(c["retrieved"], 7);
  EXPECT_EQ(c["present"], 7);  // the engine stores the whole prompt; the server keeps one copy
  EXPECT_EQ(c["stored"], 16 - 7);
  EXPECT_EQ(c["verified_bytes"], 7 * j["config"]["object_bytes"].get<int>());
  EXPECT_EQ(t["lookup_hits_over_ideal"], 1.0);

  // TTFT, priced by hand. The six inputs: 1536, 2048, 512, 1636, 1024, 1536 tokens; the hits
  // 0, 2, 0, 3, 0, 2 blocks of 512 tokens.
  const json& tok = t["tokens"];
  EXPECT_EQ(tok["input"], 8292);
  EXPECT_EQ(tok["hit"], 7 * 512);
  EXPECT_EQ(tok["ideal_hit"], 7 * 512);
  EXPECT_NEAR(tok["prefill_saved"].get<double>(), 3584.0 / 8292, 1e-12);
  EXPECT_EQ(t["model"]["name"], "llama-3.1-8b");
  EXPECT_EQ(t["model"]["kv_bytes_per_token"], 131072);  // the preset's: only the rate was given
  // Recomputing at 1 ms per token + 10 ms: sorted 522, 1034, 1546, 1546, 1646, 2058 ms.
  const json& recompute = t["ttft"]["recompute"];
  EXPECT_NEAR(recompute["p50_ms"].get<double>(), 1546, 1e-9);  // nearest rank: the 3rd of 6
  EXPECT_NEAR(recompute["p99_ms"].get<double>(), 2058, 1e-9);
  EXPECT_NEAR(recompute["mean_ms"].get<double>(), (8292 + 60) / 6.0, 1e-9);
  // With kvtier: the same fixed cost, the 4708 tokens it did not find, and the load it measured.
  const json& kvtier = t["ttft"]["kvtier"];
  const double load_mean = t["ttft"]["kvtier_retrieve"]["mean_ms"].get<double>();
  EXPECT_GT(load_mean, 0);
  EXPECT_NEAR(kvtier["mean_ms"].get<double>(), (8292 - 3584 + 60) / 6.0 + load_mean, 1e-6);
  EXPECT_EQ(t["ttft"]["ideal"], kvtier);  // one worker in trace order finds all an ideal cache does
  EXPECT_EQ(t["tiers"]["l1_hits"], 7);
  EXPECT_EQ(t["tiers"]["l2_hits"], 0);
  // The tight-loop probe after the workload times LOOKUP and its hit count in one round trip.
  EXPECT_GT(j["server_rtt_tight"]["lookup_and_wait_p50_us"].get<double>(), 0);
  // --plot: a PNG, and its rows beside it.
  std::ifstream png(plot, std::ios::binary);
  char magic[8] = {};
  png.read(magic, 8);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG") << plot;
  std::ifstream rows(::testing::TempDir() + "/hand.tsv");
  std::string header, row;
  std::getline(rows, header);
  EXPECT_EQ(header.rfind("# trace_s", 0), 0u) << header;
  EXPECT_TRUE(std::getline(rows, row)) << "no rows";
}

TEST(BenchTraceCli, PlotAndModelMistakesAreClearErrors) {
  CliOutput no_trace = RunKvtier(std::string("bench server ") + kSmall + " --plot x.png", 60);
  EXPECT_EQ(no_trace.status, 2);
  EXPECT_NE(no_trace.err.find("--plot draws a --trace replay"), std::string::npos) << no_trace.err;
  const std::string trace = WriteTrace("one.jsonl", {Line(0, 512, {0})});
  CliOutput preset = RunKvtier(
      std::string("bench server ") + kSmall + " --model-preset gpt-9 --trace " + trace, 60);
  EXPECT_EQ(preset.status, 2);
  EXPECT_NE(preset.err.find("unknown model preset 'gpt-9' (known: llama-3.1-8b"),
            std::string::npos)
      << preset.err;
}

TEST(BenchTraceCli, TwoPacedWorkersReplayAGeneratedTraceAndVerifyEveryHit) {
  // 40 requests in 8 conversations, each turn extending its conversation's previous prompt.
  std::mt19937 rng(7);
  std::vector<std::vector<int>> conversations(8);
  std::vector<std::string> lines;
  int next_id = 0;
  for (int i = 0; i < 40; ++i) {
    auto& ids = conversations[rng() % conversations.size()];
    for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) ids.push_back(next_id++);
    lines.push_back(Line(uint64_t(i) * 20, ids.size() * 512, ids));
  }
  const std::string trace = WriteTrace("generated.jsonl", lines);
  const json j =
      RunJson(std::string(kSmall) + " --workers 2 --trace-speedup 4 --trace " + trace);
  EXPECT_TRUE(j["ok"].get<bool>()) << j["errors"];
  EXPECT_EQ(j["config"]["workers"], 2);
  EXPECT_EQ(j["trace"]["requests"], 40);
  EXPECT_EQ(j["ops"]["LOOKUP"]["count"], 40);
  // The other worker may store between a LOOKUP and its RETRIEVE, so the two counts can differ.
  EXPECT_GT(j["chunks"]["lookup_hits"].get<int>(), 0);
  EXPECT_GT(j["chunks"]["retrieved"].get<int>(), 0);
  // 20 ms apart at 4x: the replay takes at least the trace's 780 ms / 4.
  EXPECT_GE(j["throughput"]["wall_s"].get<double>(), 0.19);
}

TEST(BenchTraceCli, ABadTraceIsAClearErrorNamingItsLine) {
  struct Case {
    std::string bad_line;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"{\"timestamp\": 1, \"input_length\": 512", "line 2: not valid JSON"},
      {"[1, 2]", "line 2: not a JSON object"},
      {R"({"timestamp": 1, "hash_ids": [1]})", "line 2: no \"input_length\""},
      {R"({"timestamp": -1, "input_length": 512, "hash_ids": [1]})",
       "\"timestamp\" must be a non-negative integer"},
      {R"({"timestamp": 1, "input_length": 512, "hash_ids": [1, "x"]})", "hash_ids[1]"},
      {R"({"timestamp": 1, "input_length": 1100, "hash_ids": [1, 2]})",
       "input_length 1100 needs 3 hash_ids"},
      {Line(0, 512, {1}), "line 2: timestamp 0 is before the previous line's 5"},
  };
  for (const Case& c : cases) {
    const std::string trace = WriteTrace("bad.jsonl", {Line(5, 512, {0}), c.bad_line});
    CliOutput o = RunKvtier(std::string("bench server ") + kSmall + " --trace " + trace, 300);
    EXPECT_NE(o.err.find(c.says), std::string::npos) << c.bad_line << "\n" << o.err;
    EXPECT_EQ(o.status, 2) << c.bad_line << "\n" << o.err;
  }
  CliOutput empty = RunKvtier(std::string("bench server ") + kSmall + " --trace " +
                              WriteTrace("empty.jsonl", {""}), 300);
  EXPECT_EQ(empty.status, 2);
  EXPECT_NE(empty.err.find("holds no requests"), std::string::npos) << empty.err;
}

}  // namespace
}  // namespace kvtier::testing
