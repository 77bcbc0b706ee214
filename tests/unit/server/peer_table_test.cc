#include "server/peer_table.h"

#include <gtest/gtest.h>

#include <string>

namespace kvtier {
namespace {

// A routing id as ZMQ makes it for a client that sets none: a 0 byte, then a big-endian counter.
std::string ZmqId(uint32_t n) {
  return std::string(1, '\0') + static_cast<char>(n >> 24) + static_cast<char>(n >> 16) +
         static_cast<char>(n >> 8) + static_cast<char>(n);
}

TEST(PeerTable, AGreetingIsForgottenWhenItsFdGreetsAgainUnderAnotherId) {
  PeerTable t;
  t.Greet(ZmqId(1), 13, 3, "ctl");
  t.Greet(ZmqId(2), 14, 3, "engine");
  ASSERT_NE(t.Find(ZmqId(1)), nullptr);
  EXPECT_EQ(t.Find(ZmqId(1))->client, "ctl");
  // A thousand short connections, one after another, all reusing fd 13.
  for (uint32_t n = 3; n < 1003; ++n) t.Greet(ZmqId(n), 13, 3, "ctl");
  EXPECT_EQ(t.size(), 2u);
  EXPECT_EQ(t.Find(ZmqId(1)), nullptr);
  EXPECT_NE(t.Find(ZmqId(1002)), nullptr);
  ASSERT_NE(t.Find(ZmqId(2)), nullptr);  // the client on the other fd is untouched
  EXPECT_EQ(t.Find(ZmqId(2))->client, "engine");
}

TEST(PeerTable, AStaleGreetingReadAfterTheFdsNextOwnerIsNotRecorded) {
  PeerTable t;
  t.Greet(ZmqId(8), 13, 3, "new");  // connection 7 closed and 8 took its fd; 8's HELLO read first
  t.Greet(ZmqId(7), 13, 3, "gone");
  EXPECT_EQ(t.Find(ZmqId(7)), nullptr);
  ASSERT_NE(t.Find(ZmqId(8)), nullptr);
  EXPECT_EQ(t.Find(ZmqId(8))->client, "new");
  EXPECT_EQ(t.size(), 1u);
}

TEST(PeerTable, ZmqCountersCompareAcrossTheirWrap) {
  EXPECT_TRUE(MadeBefore(ZmqId(1), ZmqId(2)));
  EXPECT_FALSE(MadeBefore(ZmqId(2), ZmqId(1)));
  EXPECT_TRUE(MadeBefore(ZmqId(0xffffffffu), ZmqId(0)));
  EXPECT_FALSE(MadeBefore(ZmqId(5), ZmqId(5)));
  EXPECT_FALSE(MadeBefore("client-a", ZmqId(9)));  // an id a client chose has no order
  EXPECT_FALSE(MadeBefore(ZmqId(9), "client-a"));
}

TEST(PeerTable, AClientThatChoseItsIdKeepsItsGreetingWhenItMovesToAnotherFd) {
  PeerTable t;
  t.Greet("worker-0", 13, 3, "w0");
  t.Greet("worker-0", 20, 3, "w0");  // it reconnected on fd 20
  t.Greet(ZmqId(4), 13, 3, "ctl");   // fd 13 is someone else's now
  ASSERT_NE(t.Find("worker-0"), nullptr);
  EXPECT_EQ(t.Find("worker-0")->fd, 20);
  EXPECT_EQ(t.size(), 2u);
  t.Greet("worker-1", 20, 3, "w1");  // a chosen id has no age: the fd's new greeter wins
  EXPECT_EQ(t.Find("worker-0"), nullptr);
  EXPECT_NE(t.Find("worker-1"), nullptr);
}

TEST(PeerTable, ConnectionsWithoutAnFdAreKeptAndForgetNobody) {
  PeerTable t;
  t.Greet(ZmqId(1), -1, 3, "inproc-a");
  t.Greet(ZmqId(2), -1, 3, "inproc-b");
  EXPECT_EQ(t.size(), 2u);
  t.Greet(ZmqId(2), -1, 4, "inproc-b");  // a second HELLO on the same connection replaces the first
  EXPECT_EQ(t.Find(ZmqId(2))->version, 4u);
  EXPECT_EQ(t.size(), 2u);
}

}  // namespace
}  // namespace kvtier
