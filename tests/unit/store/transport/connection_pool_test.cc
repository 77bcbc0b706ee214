// ConnectionPool's unreachable-peer rule against real loopback sockets. A listener whose accept
// queue is full and never accepts drops further SYNs, so connects to it time out as they would
// to a host that is down; accepting again brings it back.
#include "store/transport/connection_pool.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "common/clock.h"

namespace kvtier::store {
namespace {

using namespace std::chrono_literals;

// A loopback listener with a backlog of one that accepts nothing until Drain().
class SilentListener {
 public:
  SilentListener() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(::bind(fd_.get(), reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(::listen(fd_.get(), 0), 0);
    EXPECT_EQ(::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
    endpoint_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    // Fill the accept queue: later SYNs are dropped, so their connects wait for the deadline.
    for (int i = 0; i < 2; ++i) {
      wire::UniqueFd c(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0));
      (void)::connect(c.get(), reinterpret_cast<sockaddr*>(&a), len);
      fillers_.push_back(std::move(c));
    }
  }
  const std::string& endpoint() const { return endpoint_; }
  // Accepts everything queued, then keeps accepting (on a thread) so connects succeed again.
  void Drain() {
    fillers_.clear();
    ::fcntl(fd_.get(), F_SETFL, O_NONBLOCK);  // so the acceptor can notice stop_
    acceptor_ = std::thread([fd = fd_.get(), this] {
      while (!stop_) {
        wire::UniqueFd c(::accept4(fd, nullptr, nullptr, SOCK_NONBLOCK));
        if (c.get() >= 0) accepted_.push_back(std::move(c));
        std::this_thread::sleep_for(1ms);
      }
    });
  }
  ~SilentListener() {
    stop_ = true;
    if (acceptor_.joinable()) acceptor_.join();
  }

 private:
  wire::UniqueFd fd_;
  std::string endpoint_;
  std::vector<wire::UniqueFd> fillers_, accepted_;
  std::thread acceptor_;
  std::atomic<bool> stop_{false};
};

TEST(ConnectionPool, APeerThatDoesNotAnswerFailsAtOnceUntilItsRedial) {
  SilentListener peer;
  FakeClock clock;  // the redial interval's; the dials themselves run on real time
  ConnectionPool pool(4, "", 300ms, &clock);
  auto first = pool.Acquire(peer.endpoint(), tcp::SteadyClock::now() + 400ms);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), Code::kTimeout) << first.status().ToString();
  EXPECT_EQ(first.status().message().find("not dialled again"), std::string::npos);

  // Within the redial interval: the same error at once, saying no dial was made.
  auto second = pool.Acquire(peer.endpoint(), tcp::SteadyClock::now() + 5s);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), Code::kTimeout);
  EXPECT_NE(second.status().message().find("not dialled again yet"), std::string::npos)
      << second.status().message();

  // Once the peer answers, the first call after the interval dials it and succeeds, and the
  // pool takes it as reachable again.
  peer.Drain();
  clock.Advance(299ms);
  EXPECT_FALSE(pool.Acquire(peer.endpoint(), tcp::SteadyClock::now() + 2s).ok());
  clock.Advance(1ms);
  auto third = pool.Acquire(peer.endpoint(), tcp::SteadyClock::now() + 2s);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  auto fourth = pool.Acquire(peer.endpoint(), tcp::SteadyClock::now() + 2s);
  EXPECT_TRUE(fourth.ok()) << fourth.status().ToString();
}

TEST(ConnectionPool, ARefusalOrAShortDeadlineDoesNotMarkThePeer) {
  // A refused connect (nothing listens) is immediate: every call dials again.
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&a), len), 0);
  ASSERT_EQ(::getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len), 0);
  ::close(probe);  // the port is now closed
  const std::string closed = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  ConnectionPool pool(4, "", 10s);
  for (int i = 0; i < 3; ++i) {
    auto r = pool.Acquire(closed, tcp::SteadyClock::now() + 1s);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().find("not dialled again"), std::string::npos)
        << r.status().message();
  }
  // A deadline too short to say anything about the peer does not mark it either.
  SilentListener silent;
  for (int i = 0; i < 2; ++i) {
    auto r = pool.Acquire(silent.endpoint(), tcp::SteadyClock::now() + 5ms);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().message().find("not dialled again"), std::string::npos)
        << r.status().message();
  }
}

}  // namespace
}  // namespace kvtier::store
