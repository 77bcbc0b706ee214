#include "common/logging.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log_rate_limiter.h"

namespace kvtier {
namespace {

// The rate limiter is process-wide; fresh keys keep tests independent under --gtest_repeat.
std::string Key(const std::string& base) {
  static std::atomic<int> n{0};
  return "test." + base + "." + std::to_string(n.fetch_add(1));
}

class LoggingTest : public ::testing::Test {
 protected:
  void TearDown() override { spdlog::set_level(spdlog::level::info); }
};

TEST_F(LoggingTest, SetLogLevelAcceptsKnownNames) {
  const std::pair<const char*, spdlog::level::level_enum> cases[] = {
      {"trace", spdlog::level::trace}, {"debug", spdlog::level::debug},
      {"info", spdlog::level::info},   {"warn", spdlog::level::warn},
      {"error", spdlog::level::err},   {"off", spdlog::level::off},
      {"WARN", spdlog::level::warn},
  };
  for (const auto& [name, level] : cases) {
    EXPECT_TRUE(SetLogLevel(name)) << name;
    EXPECT_EQ(spdlog::get_level(), level) << name;
  }
}

TEST_F(LoggingTest, SetLogLevelRejectsUnknownAndKeepsLevel) {
  ASSERT_TRUE(SetLogLevel("debug"));
  EXPECT_FALSE(SetLogLevel("verbose"));
  EXPECT_FALSE(SetLogLevel(""));
  EXPECT_FALSE(SetLogLevel("offf"));
  EXPECT_EQ(spdlog::get_level(), spdlog::level::debug);
}

TEST_F(LoggingTest, InitLoggingIsIdempotentAndQuiet) {
  const bool first = spdlog::default_logger()->name() != "kvtier";
  InitLogging();
  if (first) {
    EXPECT_EQ(spdlog::get_level(), spdlog::level::warn);  // quiet by default
  }
  ASSERT_TRUE(SetLogLevel("error"));
  InitLogging();  // a second call changes nothing
  EXPECT_EQ(spdlog::default_logger()->name(), "kvtier");
  EXPECT_EQ(spdlog::get_level(), spdlog::level::err);
  EXPECT_TRUE(SetLogLevel("info"));
  EXPECT_EQ(spdlog::default_logger()->level(), spdlog::level::info);
}

TEST(ShouldLogTest, FirstCallLogsThenSuppressesWithinWindow) {
  const std::string key = Key("first");
  uint64_t suppressed = 99;
  EXPECT_TRUE(ShouldLog(key, 60.0, &suppressed));
  EXPECT_EQ(suppressed, 0u);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(ShouldLog(key, 60.0, &suppressed));
  EXPECT_EQ(suppressed, 0u);                   // untouched while suppressing
  EXPECT_TRUE(ShouldLog(Key("other"), 60.0));  // keys are independent
}

TEST(ShouldLogTest, WindowReopensAndReportsSuppressedCount) {
  FakeClock clock;
  LogRateLimiter limiter(clock);
  EXPECT_TRUE(limiter.ShouldLog("k", 0.2, nullptr));
  for (int i = 0; i < 7; ++i) EXPECT_FALSE(limiter.ShouldLog("k", 0.2, nullptr));
  clock.Advance(std::chrono::milliseconds(199));
  EXPECT_FALSE(limiter.ShouldLog("k", 0.2, nullptr));  // still inside the window: 8 suppressed
  clock.Advance(std::chrono::milliseconds(1));
  uint64_t suppressed = 0;
  EXPECT_TRUE(limiter.ShouldLog("k", 0.2, &suppressed));
  EXPECT_EQ(suppressed, 8u);
  clock.Advance(std::chrono::milliseconds(200));
  EXPECT_TRUE(limiter.ShouldLog("k", 0.2, &suppressed));
  EXPECT_EQ(suppressed, 0u);  // the count restarts with each window
}

TEST(ShouldLogTest, ZeroWindowAlwaysLogs) {
  const std::string key = Key("zero");
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(ShouldLog(key, 0.0));
}

TEST(ShouldLogTest, ExactlyOneThreadWinsARace) {
  const std::string key = Key("race");
  std::atomic<int> winners{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&winners, &key] {
      for (int i = 0; i < 1000; ++i) {
        if (ShouldLog(key, 60.0)) winners.fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(winners.load(), 1);
}

TEST(ShouldLogTest, ManyDistinctKeysStayUsable) {
  // Past the key limit expired entries are pruned; live keys keep suppressing.
  const std::string live = Key("live");
  EXPECT_TRUE(ShouldLog(live, 60.0));
  for (int i = 0; i < 10000; ++i) EXPECT_TRUE(ShouldLog(Key("many"), 0.0));
  EXPECT_FALSE(ShouldLog(live, 60.0));
}

}  // namespace
}  // namespace kvtier
