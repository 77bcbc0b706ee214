// The metadata section's yardstick (bench/common/ping_pong_probe.h): every round trip comes back
// (the probe checks each echo), over both sockets, and nothing is left running. No timing
// thresholds: only that it measured what it was asked to.
#include "bench/common/ping_pong_probe.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cerrno>

namespace kvtier::bench {
namespace {

TEST(PingPongProbe, TimesEveryRoundTripOverBothSockets) {
  for (PingPongSocket kind : {PingPongSocket::kLoopbackTcp, PingPongSocket::kUnixStream}) {
    SCOPED_TRACE(PingPongSocketName(kind));
    auto us = MeasurePingPong(kind, 64, 50, 5);
    ASSERT_TRUE(us.ok()) << us.status().ToString();
    ASSERT_EQ(us->size(), 50u);
    for (double t : *us) EXPECT_GT(t, 0);
    // The echo process has been reaped.
    EXPECT_EQ(::waitpid(-1, nullptr, WNOHANG), -1);
    EXPECT_EQ(errno, ECHILD);
  }
}

TEST(PingPongProbe, LargerMessagesComeBackWhole) {
  auto us = MeasurePingPong(PingPongSocket::kLoopbackTcp, 256 << 10, 3, 1);
  ASSERT_TRUE(us.ok()) << us.status().ToString();
  EXPECT_EQ(us->size(), 3u);
}

TEST(PingPongProbe, NothingToSendIsAnError) {
  EXPECT_FALSE(MeasurePingPong(PingPongSocket::kUnixStream, 0, 10, 0).ok());
  EXPECT_FALSE(MeasurePingPong(PingPongSocket::kLoopbackTcp, 64, 0, 0).ok());
  EXPECT_STREQ(PingPongSocketName(PingPongSocket::kLoopbackTcp), "tcp");
  EXPECT_STREQ(PingPongSocketName(PingPongSocket::kUnixStream), "unix");
}

}  // namespace
}  // namespace kvtier::bench
