#include "common/eventfd.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>

#include <thread>
#include <vector>

namespace kvtier {
namespace {

bool Readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

TEST(EventNotifierTest, DrainWithoutNotifyReturnsZeroWithoutBlocking) {
  EventNotifier n;
  EXPECT_GE(n.Fd(), 0);
  EXPECT_TRUE(fcntl(n.Fd(), F_GETFL) & O_NONBLOCK);
  EXPECT_TRUE(fcntl(n.Fd(), F_GETFD) & FD_CLOEXEC);
  EXPECT_FALSE(Readable(n.Fd(), 0));
  EXPECT_EQ(n.Drain(), 0u);
}

TEST(EventNotifierTest, NotificationsAccumulateUntilDrained) {
  EventNotifier n;
  n.Notify();
  n.Notify();
  n.Notify();
  EXPECT_TRUE(Readable(n.Fd(), 0));
  EXPECT_EQ(n.Drain(), 3u);
  EXPECT_FALSE(Readable(n.Fd(), 0));
  EXPECT_EQ(n.Drain(), 0u);
}

TEST(EventNotifierTest, WakesAPollerInAnotherThread) {
  EventNotifier n;
  std::vector<std::thread> senders;
  for (int i = 0; i < 4; ++i) {
    senders.emplace_back([&n] {
      for (int j = 0; j < 250; ++j) n.Notify();
    });
  }
  uint64_t total = 0;
  while (total < 1000) {
    ASSERT_TRUE(Readable(n.Fd(), 10000)) << "no wakeup after " << total;
    total += n.Drain();
  }
  for (auto& t : senders) t.join();
  EXPECT_EQ(total, 1000u);
}

TEST(EventNotifierTest, DestructorClosesFd) {
  int fd;
  {
    EventNotifier n;
    fd = n.Fd();
  }
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
}

}  // namespace
}  // namespace kvtier
