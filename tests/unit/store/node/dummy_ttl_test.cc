// The dummy TTL on a FakeClock: whether a dummy is silent for too long is decided by the
// service's injected clock, so the test moves time instead of waiting it out.
#include <gtest/gtest.h>

#include <chrono>

#include "dummy_test_util.h"

namespace kvtier::store {
namespace {

using testing::NodeWithDummies;
using testing::RawDummy;
using testing::WaitFor;

// Expiry here is fake time only; the TTL is also the sockets' real send timeout, so it is long.
constexpr auto kTtl = std::chrono::minutes(10);

Status Ping(RawDummy& dummy) {
  dummy::Request ping;
  ping.op = dummy::Op::kPing;
  auto reply = dummy.Call(ping);
  if (!reply.ok()) return reply.status();
  return reply->status.ok() ? Status::Ok() : Status(Code::kInternal, reply->status.ToString());
}

TEST(DummyTtlClockTest, OnlyADummySilentLongerThanTheTtlIsReaped) {
  FakeClock clock;
  NodeWithDummies env(kTtl, 0, &clock);
  ASSERT_NE(env.node, nullptr);
  RawDummy stale(env.service_port);
  ASSERT_TRUE(stale.Hello("stale").ok());
  RawDummy fresh(env.service_port);

  // A session stamps its last request just after the reply leaves, so stale's stamp is the time
  // before or after this step: either way it is at most one TTL old, which is not over it.
  clock.Advance(kTtl);
  ASSERT_TRUE(fresh.Hello("fresh").ok());
  env.service->CheckTtl();
  EXPECT_EQ(env.service->connected(), 2u);

  // Now stale is over the TTL whichever its stamp; fresh was just heard from.
  clock.Advance(kTtl + std::chrono::nanoseconds(1));
  ASSERT_TRUE(Ping(fresh).ok());
  // Polled only because a session may still be finishing its last request (busy): no fake time
  // passes in between.
  EXPECT_TRUE(WaitFor([&] {
    env.service->CheckTtl();
    return env.service->connected() == 1u;
  }));
  EXPECT_TRUE(stale.ClosedByPeer());
  EXPECT_EQ(env.Counter("kvtier_node_dummy_disconnects_total", {{"reason", "ttl"}}), 1);
  EXPECT_TRUE(Ping(fresh).ok());
}

}  // namespace
}  // namespace kvtier::store
