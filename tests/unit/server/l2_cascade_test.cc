// L2Cascade's health on a FakeClock: a failing adapter is skipped until its back-off has passed
// on the cascade's clock, and the back-off doubles with each failed probe. The failures are real
// (a mem adapter slower than its 1 ms deadline), only the waiting is advanced. Also the names its
// metrics and /status give each operation.
#include "server/l2_cascade.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "common/clock.h"

namespace kvtier {
namespace {

using std::chrono::milliseconds;

class L2CascadeHealthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto l2 = L2Cascade::Create({R"({"type":"mem","delay_ms":60000,"deadline_ms":1})"},
                                ConnectorRegistry::WithBuiltins(), metrics_, {}, clock_);
    ASSERT_TRUE(l2.ok()) << l2.status().ToString();
    l2_ = std::move(l2).value();
  }
  Completion Lookup() {
    return l2_
        ->Submit(0, ConnectorOp::kLookup,
                 [](Connector& c) { return c.SubmitLookup({"model@00000000@0@k"}); })
        .get();
  }
  bool Available() { return l2_->Available(0, ConnectorOp::kLookup); }

  FakeClock clock_;
  MetricsRegistry metrics_;
  std::unique_ptr<L2Cascade> l2_;
};

TEST_F(L2CascadeHealthTest, AFailedAdapterIsRetriedOnlyOnceItsBackoffHasPassedOnTheClock) {
  EXPECT_TRUE(l2_->Up(0));
  EXPECT_TRUE(Available());
  ASSERT_EQ(Lookup().status.code(), Code::kTimeout);
  EXPECT_FALSE(l2_->Up(0));
  EXPECT_FALSE(Available());
  EXPECT_FALSE(l2_->Available(0, ConnectorOp::kRemove));  // down for reads is down for writes
  clock_.Advance(milliseconds(99));
  EXPECT_FALSE(Available());
  clock_.Advance(milliseconds(1));  // 100 ms: the first back-off
  EXPECT_TRUE(Available());         // the next operation is the probe
  EXPECT_FALSE(l2_->Up(0));         // but the adapter is not up until one succeeds

  ASSERT_EQ(Lookup().status.code(), Code::kTimeout);  // the probe fails: twice as long
  clock_.Advance(milliseconds(199));
  EXPECT_FALSE(Available());
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(Available());
}

TEST_F(L2CascadeHealthTest, TheBackoffStopsGrowingAtFiveSeconds) {
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(Lookup().status.code(), Code::kTimeout);
    clock_.Advance(std::chrono::seconds(5));  // always enough
    ASSERT_TRUE(Available()) << "after failure " << i + 1;
  }
  ASSERT_EQ(Lookup().status.code(), Code::kTimeout);
  clock_.Advance(milliseconds(4999));
  EXPECT_FALSE(Available());
  clock_.Advance(milliseconds(1));
  EXPECT_TRUE(Available());
}

// The `op` label of kvtier_l2_* and the /status keys are the op pool names (docs/metrics.md).
TEST(L2CascadeNamesTest, MetricsAndStatusNameOperationsLookupLoadWriteRemove) {
  FakeClock clock;
  MetricsRegistry metrics;
  auto l2 = L2Cascade::Create({R"({"type":"mem"})"}, ConnectorRegistry::WithBuiltins(), metrics, {},
                              clock);
  ASSERT_TRUE(l2.ok()) << l2.status().ToString();
  const nlohmann::json status = (*l2)->Status();
  ASSERT_EQ(status.size(), 1u);
  const std::string text = metrics.RenderPrometheus();
  for (const char* op : {"lookup", "load", "write", "remove"}) {
    EXPECT_TRUE(status[0].contains(op)) << op << " missing from " << status[0].dump();
    EXPECT_NE(text.find(std::string("op=\"") + op + "\""), std::string::npos) << op;
  }
  for (const char* old : {"retrieve", "store", "delete"}) {
    EXPECT_FALSE(status[0].contains(old)) << old;
    EXPECT_EQ(text.find(std::string("op=\"") + old + "\""), std::string::npos) << old;
  }
}

}  // namespace
}  // namespace kvtier
