// NodeLiveness: registration, touch, expiry strictly after last_seen + ttl.
#include "store/master/node_liveness.h"

#include <gtest/gtest.h>

namespace kvtier::store {
namespace {

using std::chrono::nanoseconds;

TEST(NodeLivenessTest, TouchExpireForget) {
  NodeLiveness nodes;
  EXPECT_FALSE(nodes.Touch("a", 0));
  nodes.Register(NodeInfo{"a", "h:1"}, 100);
  nodes.Register(NodeInfo{"b", "h:2"}, 100);
  EXPECT_TRUE(nodes.Known("a"));
  EXPECT_EQ(nodes.size(), 2u);
  EXPECT_TRUE(nodes.Touch("b", 150));

  EXPECT_TRUE(nodes.TakeExpired(200, nanoseconds(100)).empty());  // 100 + 100 is not < 200
  EXPECT_EQ(nodes.TakeExpired(201, nanoseconds(100)), std::vector<std::string>{"a"});
  EXPECT_FALSE(nodes.Known("a"));
  EXPECT_FALSE(nodes.Touch("a", 201));
  EXPECT_EQ(nodes.nodes().at("b").endpoint, "h:2");

  nodes.Register(NodeInfo{"b", "h:3"}, 300);  // re-registering refreshes the endpoint
  EXPECT_EQ(nodes.nodes().at("b").endpoint, "h:3");
  EXPECT_EQ(nodes.nodes().at("b").last_seen_ns, 300);

  EXPECT_TRUE(nodes.Forget("b"));  // replaced by a node at its endpoint
  EXPECT_FALSE(nodes.Known("b"));
  EXPECT_FALSE(nodes.Forget("b"));
  EXPECT_EQ(nodes.size(), 0u);
}

}  // namespace
}  // namespace kvtier::store
