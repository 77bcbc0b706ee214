// Small-message round trips between two processes over a plain socket (ping_pong_probe.h). Plain
// POSIX calls only: the yardstick does not depend on the store's transport code it judges.
#include "bench/common/ping_pong_probe.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "bench/common/blocking_socket.h"
#include "bench/common/child_process.h"
#include "bench/common/timing.h"

namespace kvtier::bench {

namespace {

constexpr auto kEchoGrace = std::chrono::seconds(5);
constexpr int kAcceptTimeoutMs = 10000;

// Closes the descriptor when it goes out of scope (in the parent; a forked child _exit()s).
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

Status Errno(const char* what) {
  return Status(Code::kIoError, fmt::format("ping-pong: {}: {}", what, std::strerror(errno)));
}

void NoDelay(int fd) {
  const int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// The echo side, in the forked child: every message straight back until the peer closes.
int Echo(int fd, size_t message_bytes) {
  std::vector<uint8_t> buf(message_bytes);
  while (RecvBlocking(fd, buf.data(), buf.size())) {
    if (!SendBlocking(fd, buf.data(), buf.size())) return 1;
  }
  return 0;
}

// The timing side. Every echo is compared with what was sent (its first byte changes per trip).
Result<std::vector<double>> PingPong(int fd, size_t message_bytes, size_t count, size_t warmup) {
  std::vector<uint8_t> out(message_bytes, 0x5a), in(message_bytes, 0);
  std::vector<double> us;
  us.reserve(count);
  for (size_t i = 0; i < warmup + count; ++i) {
    out[0] = static_cast<uint8_t>(i);
    const auto t0 = BenchClock::now();
    if (!SendBlocking(fd, out.data(), out.size()) || !RecvBlocking(fd, in.data(), in.size())) {
      return Status(Code::kIoError,
                    fmt::format("ping-pong: the echo process went away after {} round trips", i));
    }
    const double t = MicrosSince(t0);
    if (std::memcmp(in.data(), out.data(), out.size()) != 0) {
      return Status(Code::kInternal, "ping-pong: the echo differs from the message sent");
    }
    if (i >= warmup) us.push_back(t);
  }
  return us;
}

// Runs the timing side on `fd` against the echo process `echo`, then closes `fd` (end of stream:
// the echo process exits) and reaps it.
Result<std::vector<double>> TimeAgainst(process::Child& echo, Fd& fd, size_t message_bytes,
                                        size_t count, size_t warmup) {
  auto us = PingPong(fd.get(), message_bytes, count, warmup);
  fd.Reset();
  const int code = echo.Finish(kEchoGrace);
  if (us.ok() && code != 0) {
    return Status(Code::kInternal, fmt::format("ping-pong: the echo process exited with {}", code));
  }
  return us;
}

Result<std::vector<double>> OverUnixStream(size_t message_bytes, size_t count, size_t warmup) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return Errno("socketpair");
  Fd mine(sv[0]), theirs(sv[1]);
  auto echo = process::Child::Fork([&] {
    mine.Reset();
    return Echo(theirs.get(), message_bytes);
  });
  if (!echo.ok()) return echo.status();
  theirs.Reset();
  return TimeAgainst(*echo, mine, message_bytes, count, warmup);
}

Result<std::vector<double>> OverLoopbackTcp(size_t message_bytes, size_t count, size_t warmup) {
  Fd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (listener.get() < 0) return Errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;  // the kernel picks a free port
  socklen_t len = sizeof(addr);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listener.get(), 1) != 0 ||
      ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Errno("listen on 127.0.0.1");
  }
  auto echo = process::Child::Fork([&] {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, kAcceptTimeoutMs) != 1) return 2;
    Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) return 2;
    listener.Reset();
    NoDelay(conn.get());
    return Echo(conn.get(), message_bytes);
  });
  if (!echo.ok()) return echo.status();
  listener.Reset();  // the child holds it
  Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0 || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = Errno("connect to the echo process");
    fd.Reset();
    (void)echo->Finish(kEchoGrace);
    return s;
  }
  NoDelay(fd.get());
  return TimeAgainst(*echo, fd, message_bytes, count, warmup);
}

}  // namespace

const char* PingPongSocketName(PingPongSocket kind) {
  return kind == PingPongSocket::kLoopbackTcp ? "tcp" : "unix";
}

Result<std::vector<double>> MeasurePingPong(PingPongSocket kind, size_t message_bytes, size_t count,
                                            size_t warmup) {
  if (message_bytes == 0 || count == 0) {
    return Status(Code::kInvalidArgument, "ping-pong: nothing to send");
  }
  return kind == PingPongSocket::kLoopbackTcp ? OverLoopbackTcp(message_bytes, count, warmup)
                                              : OverUnixStream(message_bytes, count, warmup);
}

}  // namespace kvtier::bench
