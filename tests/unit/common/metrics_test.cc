#include "common/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

namespace kvtier {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(MetricsTest, CounterWithLabelsRendersExactLines) {
  MetricsRegistry reg;
  Counter* c =
      reg.GetCounter("kvt_requests_total", "Requests handled.", {{"op", "get"}, {"status", "ok"}});
  c->Inc();
  c->Inc(2);
  EXPECT_EQ(reg.RenderPrometheus(),
            "# HELP kvt_requests_total Requests handled.\n"
            "# TYPE kvt_requests_total counter\n"
            "kvt_requests_total{op=\"get\",status=\"ok\"} 3\n");
}

TEST(MetricsTest, SameNameAndLabelsSameHandle) {
  MetricsRegistry reg;
  Counter* a = reg.GetCounter("c", "help", {{"k", "v"}});
  EXPECT_EQ(a, reg.GetCounter("c", "other help", {{"k", "v"}}));
  EXPECT_NE(a, reg.GetCounter("c", "help", {{"k", "w"}}));
  EXPECT_NE(a, reg.GetCounter("c", "help"));
  Gauge* g = reg.GetGauge("g", "help");
  EXPECT_EQ(g, reg.GetGauge("g", "help"));
  Histogram* h = reg.GetHistogram("h", "help");
  EXPECT_EQ(h, reg.GetHistogram("h", "help"));
  EXPECT_THAT(reg.RenderPrometheus(), HasSubstr("# HELP c help\n"));  // first help kept
}

TEST(MetricsTest, SeriesAndFamiliesAreSorted) {
  MetricsRegistry reg;
  reg.GetGauge("zeta", "z")->Set(1);
  reg.GetCounter("alpha", "a", {{"x", "2"}})->Inc();
  reg.GetCounter("alpha", "a", {{"x", "1"}})->Inc(5);
  EXPECT_EQ(reg.RenderPrometheus(),
            "# HELP alpha a\n# TYPE alpha counter\nalpha{x=\"1\"} 5\nalpha{x=\"2\"} 1\n"
            "# HELP zeta z\n# TYPE zeta gauge\nzeta 1\n");
}

TEST(MetricsTest, HistogramCumulativeBuckets) {
  MetricsRegistry reg;
  Histogram* h = reg.GetHistogram("lat_seconds", "Latency.", {{"op", "put"}}, {1, 0.1, 0.5});
  EXPECT_EQ(h->Bounds(), (std::vector<double>{0.1, 0.5, 1}));  // sorted
  for (double v : {0.05, 0.1, 0.3, 0.7, 2.0, 3.0}) h->Observe(v);
  EXPECT_EQ(h->BucketCount(0), 2u);  // 0.05 and 0.1 (le is inclusive)
  EXPECT_EQ(h->BucketCount(3), 2u);  // +Inf
  EXPECT_EQ(h->Count(), 6u);
  EXPECT_DOUBLE_EQ(h->Sum(), 6.15);
  const auto lines = Lines(reg.RenderPrometheus());
  const std::vector<std::string> expected = {
      "# HELP lat_seconds Latency.",
      "# TYPE lat_seconds histogram",
      "lat_seconds_bucket{op=\"put\",le=\"0.1\"} 2",
      "lat_seconds_bucket{op=\"put\",le=\"0.5\"} 3",
      "lat_seconds_bucket{op=\"put\",le=\"1\"} 4",
      "lat_seconds_bucket{op=\"put\",le=\"+Inf\"} 6",
      "lat_seconds_sum{op=\"put\"} 6.15",
      "lat_seconds_count{op=\"put\"} 6",
  };
  EXPECT_EQ(lines, expected);
}

TEST(MetricsTest, HistogramWithoutLabelsAndOddBounds) {
  Histogram h({2, 1, 2, std::numeric_limits<double>::infinity()});
  EXPECT_EQ(h.Bounds(), (std::vector<double>{1, 2}));  // deduplicated, +Inf implicit
  h.Observe(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(h.Count(), 0u);
  MetricsRegistry reg;
  reg.GetHistogram("h", "", {}, {1})->Observe(0.5);
  EXPECT_EQ(reg.RenderPrometheus(),
            "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 0.5\n"
            "h_count 1\n");
}

TEST(MetricsTest, LatencyBuckets) {
  const auto b = Histogram::LatencyBuckets();
  ASSERT_FALSE(b.empty());
  EXPECT_DOUBLE_EQ(b.front(), 1e-5);
  EXPECT_DOUBLE_EQ(b.back(), 10.0);
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  MetricsRegistry reg;
  reg.GetHistogram("l", "h");
  const std::string text = reg.RenderPrometheus();
  EXPECT_THAT(text, HasSubstr("l_bucket{le=\"1e-05\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("l_bucket{le=\"0.0025\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("l_bucket{le=\"10\"} 0\n"));
}

TEST(MetricsTest, EscapesLabelValuesAndHelp) {
  MetricsRegistry reg;
  reg.GetGauge("g", "line1\nback\\slash", {{"path", "a\\b\"c\nd"}})->Set(-2.5);
  EXPECT_EQ(reg.RenderPrometheus(),
            "# HELP g line1\\nback\\\\slash\n# TYPE g gauge\n"
            "g{path=\"a\\\\b\\\"c\\nd\"} -2.5\n");
}

TEST(MetricsTest, SpecialValues) {
  MetricsRegistry reg;
  Gauge* g = reg.GetGauge("g", "h");
  g->Set(std::numeric_limits<double>::infinity());
  EXPECT_THAT(reg.RenderPrometheus(), HasSubstr("\ng +Inf\n"));
  g->Set(std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(reg.RenderPrometheus(), HasSubstr("\ng NaN\n"));
  g->Set(1e21);
  EXPECT_THAT(reg.RenderPrometheus(), HasSubstr("\ng 1e+21\n"));
}

TEST(MetricsTest, CounterIgnoresNegativeAndNaN) {
  Counter c;
  c.Inc(2);
  c.Inc(-1);
  c.Inc(std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(c.Value(), 2);
  Gauge g;
  g.Add(2);
  g.Add(-3.5);
  EXPECT_EQ(g.Value(), -1.5);
}

TEST(MetricsTest, TypeConflictIsDetachedNotExported) {
  MetricsRegistry reg;
  reg.GetCounter("dup", "a counter")->Inc(1);
  Gauge* g = reg.GetGauge("dup", "a gauge");
  ASSERT_NE(g, nullptr);
  g->Set(42);                                    // usable
  EXPECT_EQ(g, reg.GetGauge("dup", "a gauge"));  // the same detached handle every time
  Histogram* h = reg.GetHistogram("dup", "a histogram");
  h->Observe(1);
  const std::string text = reg.RenderPrometheus();
  EXPECT_EQ(text, "# HELP dup a counter\n# TYPE dup counter\ndup 1\n");
}

TEST(MetricsTest, InvalidNamesAreDetached) {
  MetricsRegistry reg;
  reg.GetCounter("bad name", "h")->Inc();
  reg.GetCounter("9lives", "h")->Inc();
  reg.GetCounter("ok", "h", {{"bad-label", "x"}})->Inc();
  reg.GetCounter("ok2", "h", {{"__reserved", "x"}})->Inc();
  reg.GetHistogram("hist", "h", {{"le", "1"}})->Observe(1);
  EXPECT_EQ(reg.RenderPrometheus(), "");
  reg.GetCounter("ns:sub_total", "colons are allowed in metric names")->Inc();
  EXPECT_THAT(reg.RenderPrometheus(), HasSubstr("\nns:sub_total 1\n"));
}

TEST(MetricsTest, ConcurrentIncrementsAreExact) {
  MetricsRegistry reg;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&reg, t] {
      // Lookups race with each other and with rendering too.
      Counter* c = reg.GetCounter("hits_total", "h", {{"shard", "0"}});
      Gauge* g = reg.GetGauge("level", "h");
      Histogram* h = reg.GetHistogram("obs", "h", {}, {0.5});
      for (int i = 0; i < kPerThread; ++i) {
        c->Inc();
        g->Add(t % 2 == 0 ? 1.0 : -1.0);
        h->Observe(i % 2 == 0 ? 0.25 : 1.0);
        if (i % 5000 == 0) (void)reg.RenderPrometheus();
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(reg.GetCounter("hits_total", "h", {{"shard", "0"}})->Value(), kThreads * kPerThread);
  EXPECT_EQ(reg.GetGauge("level", "h")->Value(), 0);
  Histogram* h = reg.GetHistogram("obs", "h", {}, {0.5});
  EXPECT_EQ(h->Count(), uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(h->BucketCount(0), uint64_t{kThreads} * kPerThread / 2);
  EXPECT_DOUBLE_EQ(h->Sum(), kThreads * kPerThread / 2 * 1.25);
  EXPECT_THAT(reg.RenderPrometheus(), HasSubstr("hits_total{shard=\"0\"} 160000\n"));
  EXPECT_THAT(reg.RenderPrometheus(), Not(HasSubstr("e+")));
}

}  // namespace
}  // namespace kvtier
