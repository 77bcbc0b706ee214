#include "server/session_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "common/clock.h"

namespace kvtier {
namespace {

using std::chrono::milliseconds;

ObjectKey Key(const char* model, uint8_t seed) {
  ObjectKey k;
  k.model = model;
  k.hash.fill(seed);
  return k;
}

TEST(SessionManagerTest, GetOrCreateReturnsTheSameSession) {
  SessionManager m(milliseconds(60000));
  auto a = m.GetOrCreate("r1");
  auto b = m.GetOrCreate("r1");
  auto c = m.GetOrCreate("r2");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(m.Count(), 2u);
  EXPECT_EQ(m.Find("r1"), a);
  EXPECT_EQ(m.Find("nope"), nullptr);
}

TEST(SessionManagerTest, EmptyIdIsNotRemembered) {
  SessionManager m(milliseconds(60000));
  auto a = m.GetOrCreate("");
  auto b = m.GetOrCreate("");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(m.Count(), 0u);
  EXPECT_EQ(m.Find(""), nullptr);
}

TEST(SessionManagerTest, Remove) {
  SessionManager m(milliseconds(60000));
  auto a = m.GetOrCreate("r");
  a->hashes.resize(3);
  auto removed = m.Remove("r");
  EXPECT_EQ(removed, a);
  EXPECT_EQ(m.Count(), 0u);
  EXPECT_EQ(m.Remove("r"), nullptr);
  EXPECT_EQ(m.Find("r"), nullptr);
  // A new session under the old id starts empty.
  auto fresh = m.GetOrCreate("r");
  EXPECT_NE(fresh, a);
  EXPECT_TRUE(fresh->hashes.empty());
}

TEST(SessionManagerTest, SweepReturnsPinsOfExpiredSessionsOnly) {
  FakeClock clock;
  SessionManager m(milliseconds(20), clock);
  auto old1 = m.GetOrCreate("old1");
  old1->lookup_pins = {Key("m", 1), Key("m", 2)};
  auto old2 = m.GetOrCreate("old2");
  old2->lookup_pins = {Key("m", 3)};
  auto kept = m.GetOrCreate("kept");
  kept->lookup_pins = {Key("m", 9)};
  clock.Advance(milliseconds(40));
  ASSERT_NE(m.Find("kept"), nullptr);  // Find counts as use
  m.GetOrCreate("young");

  auto pins = m.Sweep();
  std::sort(pins.begin(), pins.end());
  EXPECT_EQ(pins, (std::vector<ObjectKey>{Key("m", 1), Key("m", 2), Key("m", 3)}));
  EXPECT_EQ(m.Count(), 2u);
  EXPECT_EQ(m.Find("old1"), nullptr);
  EXPECT_NE(m.Find("kept"), nullptr);
  // The pins were handed over: a holder of the expired session does not see them any more.
  EXPECT_TRUE(old1->lookup_pins.empty());
  EXPECT_EQ(kept->lookup_pins.size(), 1u);
  // Nothing new expired: a second sweep returns nothing.
  EXPECT_TRUE(m.Sweep().empty());
}

TEST(SessionManagerTest, SweepOfFreshSessionsIsEmpty) {
  SessionManager m(milliseconds(60000));
  m.GetOrCreate("a")->lookup_pins = {Key("m", 1)};
  EXPECT_TRUE(m.Sweep().empty());
  EXPECT_EQ(m.Count(), 1u);
}

TEST(SessionManagerTest, ASessionExpiresOnlyOnceIdleForLongerThanTheTtl) {
  FakeClock clock;
  SessionManager m(milliseconds(100), clock);
  m.GetOrCreate("r")->lookup_pins = {Key("m", 1)};
  clock.Advance(milliseconds(100));  // idle for exactly the TTL: still alive
  EXPECT_TRUE(m.Sweep().empty());
  EXPECT_EQ(m.Count(), 1u);
  clock.Advance(std::chrono::nanoseconds(1));
  EXPECT_EQ(m.Sweep(), (std::vector<ObjectKey>{Key("m", 1)}));
  EXPECT_EQ(m.Count(), 0u);
}

TEST(SessionManagerTest, EveryUseRestartsTheIdleTime) {
  FakeClock clock;
  SessionManager m(milliseconds(100), clock);
  m.GetOrCreate("r");
  for (int i = 0; i < 5; ++i) {  // 300 ms in all, never 100 ms idle
    clock.Advance(milliseconds(60));
    if (i % 2 == 0) {
      ASSERT_NE(m.Find("r"), nullptr);
    } else {
      m.GetOrCreate("r");
    }
    EXPECT_TRUE(m.Sweep().empty());
  }
  EXPECT_EQ(m.Count(), 1u);
  clock.Advance(milliseconds(101));
  m.Sweep();
  EXPECT_EQ(m.Count(), 0u);
}

}  // namespace
}  // namespace kvtier
