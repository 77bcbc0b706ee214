// Connections that come and go (each `kvtier ctl` call is one) must leave nothing behind in a
// server that runs for months: the socket thread forgets a closed connection's HELLO once the
// kernel hands its fd to the next connection (server/peer_table.h), and never a live client's.
#include <gtest/gtest.h>

#include "fault/server_fault_fixture.h"

namespace kvtier::fault {
namespace {

TEST(ServerConnectionChurn, ClosedConnectionsLeaveNoGreetingBehind) {
  FaultServer server({});
  RawClient engine(server.port());  // a long-lived client, greeted before the churn
  ASSERT_TRUE(engine.Hello().ok());

  constexpr int kConnections = 300;
  for (int i = 0; i < kConnections; ++i) {
    RawClient ctl(server.port());
    ASSERT_TRUE(ctl.Hello().ok()) << "connection " << i;
  }
  const double greeted = server.Metric("kvtier_greeted_clients");
  EXPECT_GE(greeted, 1) << "the gauge is missing";
  // The engine, the last ctl and whatever fds the churn had open at once: a handful, not 301.
  EXPECT_LE(greeted, 16) << "closed connections are still remembered";

  // The engine's greeting survived the churn: a request that needs HELLO is served.
  const uint64_t id = engine.Send(wire::RequestType::kStats, wire::BodyWriter().Finish());
  auto reply = engine.Receive(seconds(10));
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->id, id);
  EXPECT_TRUE(reply->status.ok()) << reply->status.ToString();
}

}  // namespace
}  // namespace kvtier::fault
