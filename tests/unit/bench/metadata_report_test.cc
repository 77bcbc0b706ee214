// The metadata section's report (bench/store/metadata_report.h): ratios to the raw TCP round trip,
// goals met at or under their target, and what counts as verified.
#include "bench/store/metadata_report.h"

#include <gtest/gtest.h>

#include <string>

namespace kvtier::bench {
namespace {

using nlohmann::json;

LatencyRow Row(const std::string& client, const std::string& op, uint32_t keys, double p50,
               size_t calls = 10) {
  LatencyRow r{client, op, keys, {}};
  r.us.count = calls;
  r.us.p50 = p50;
  r.us.p99 = 2 * p50;
  return r;
}

// Every row a run has, all at p50 = 100 us, except the two exists(32) rows.
MetadataSection Section(double embedded_exists32, double dummy_exists32) {
  MetadataSection m;
  m.calls = 10;
  m.checked_answers = 100;
  m.raw["tcp"].count = m.raw["unix"].count = 40;
  m.raw["tcp"].p50 = 20;
  m.raw["unix"].p50 = 25;
  for (const char* client : {"dummy", "embedded"}) {
    const double exists32 = std::string(client) == "dummy" ? dummy_exists32 : embedded_exists32;
    m.rows.push_back(Row(client, "exists", 1, 100));
    m.rows.push_back(Row(client, "exists", 32, exists32));
    m.rows.push_back(Row(client, "get-size", 1, 100));
    for (const char* op : {"put", "remove"}) {
      m.rows.push_back(Row(client, op, 1, 100));
      m.rows.push_back(Row(client, op, 32, 100));
    }
  }
  for (const char* op : {"put-start", "put-end"}) {
    m.rows.push_back(Row("master", op, 1, 100));
    m.rows.push_back(Row("master", op, 32, 100));
  }
  return m;
}

TEST(MetadataReport, RowsAreComparedWithTheRawTcpRoundTrip) {
  const json j = MetadataJson(Section(26, 50));
  EXPECT_TRUE(j["verified"].get<bool>());
  ASSERT_EQ(j["rows"].size(), 18u);
  EXPECT_DOUBLE_EQ(j["rows"][0]["p50_over_raw_tcp"].get<double>(), 5.0);  // 100 / 20
  EXPECT_DOUBLE_EQ(j["raw"]["unix"]["p50_us"].get<double>(), 25);
}

TEST(MetadataReport, GoalsAreMetAtOrUnderTheirTarget) {
  // embedded 26 / 20 = 1.3 (met, at the target); dummy 51 / 20 = 2.55 (missed)
  const json goals = MetadataGoals(MetadataJson(Section(26, 51)));
  ASSERT_EQ(goals.size(), 2u);
  EXPECT_NE(goals[0]["goal"].get<std::string>().find("embedded exists(32)"), std::string::npos);
  EXPECT_DOUBLE_EQ(goals[0]["value"].get<double>(), 1.3);
  EXPECT_TRUE(goals[0]["met"].get<bool>());
  EXPECT_DOUBLE_EQ(goals[1]["target"].get<double>(), kDummyExistGoalOverRawTcp);
  EXPECT_FALSE(goals[1]["met"].get<bool>());
}

TEST(MetadataReport, NoRawTcpMeansNoRatioAndNoGoalMet) {
  MetadataSection m = Section(26, 50);
  m.raw.erase("tcp");
  m.errors.push_back("raw tcp ping-pong: failed");
  const json j = MetadataJson(m);
  EXPECT_TRUE(j["rows"][0]["p50_over_raw_tcp"].is_null());
  EXPECT_FALSE(j["verified"].get<bool>());
  for (const json& g : MetadataGoals(j)) EXPECT_FALSE(g["met"].get<bool>()) << g;
}

TEST(MetadataReport, AWrongAnswerOrAMissingRowIsNotVerified) {
  MetadataSection m = Section(26, 50);
  EXPECT_TRUE(MetadataVerified(m));
  m.wrong_answers = 1;
  EXPECT_FALSE(MetadataVerified(m));
  m = Section(26, 50);
  m.rows.pop_back();
  EXPECT_FALSE(MetadataVerified(m));
  m = Section(26, 50);
  m.rows[3].us.count = 9;  // a row cut short
  EXPECT_FALSE(MetadataVerified(m));
}

TEST(MetadataReport, ASectionNotRunHasNoGoalsAndNothingToVerify) {
  MetadataSection m;
  m.unavailable = "not selected (--sections)";
  EXPECT_TRUE(MetadataVerified(m));
  const json j = MetadataJson(m);
  EXPECT_TRUE(MetadataGoals(j).empty());
}

}  // namespace
}  // namespace kvtier::bench
