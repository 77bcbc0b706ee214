// Raw loopback TCP throughput (see raw_tcp_probe.h).
#include "store/transport/raw_tcp_probe.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <thread>
#include <vector>

#include "store/transport/tcp_io.h"

namespace kvtier::store {
namespace {

bool SendBlocking(int fd, const uint8_t* p, size_t len) {
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

bool RecvBlocking(int fd, uint8_t* p, size_t len) {
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, MSG_WAITALL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

void MakeBlocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
}

}  // namespace

Result<double> MeasureRawLoopbackTcp(size_t message_bytes, size_t count) {
  if (message_bytes == 0 || count == 0) return Status(Code::kInvalidArgument, "nothing to send");
  auto listener = tcp::Listen("127.0.0.1", 0, 1);
  if (!listener.ok()) return listener.status();
  auto port = tcp::LocalPort(listener->get());
  if (!port.ok()) return port.status();

  bool receiver_ok = false;
  std::thread receiver([&] {
    wire::UniqueFd conn(::accept4(listener->get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!conn.valid()) return;
    tcp::SetNoDelay(conn.get());
    std::vector<uint8_t> buf(message_bytes, 0);
    for (size_t i = 0; i < count; ++i) {
      if (!RecvBlocking(conn.get(), buf.data(), buf.size())) return;
    }
    const uint8_t ack = 1;
    receiver_ok = SendBlocking(conn.get(), &ack, 1);
  });

  const auto deadline = tcp::Clock::now() + std::chrono::seconds(10);
  auto fd = tcp::Connect(fmt::format("127.0.0.1:{}", *port), deadline);
  if (!fd.ok()) {
    // Unblocks the receiver's accept.
    auto unblock = tcp::Connect(fmt::format("127.0.0.1:{}", *port), deadline);
    receiver.join();
    return fd.status();
  }
  MakeBlocking(fd->get());
  std::vector<uint8_t> buf(message_bytes, 0x5a);
  const auto start = std::chrono::steady_clock::now();
  bool sent = true;
  for (size_t i = 0; i < count && sent; ++i) sent = SendBlocking(fd->get(), buf.data(), buf.size());
  uint8_t ack = 0;
  const bool acked = sent && RecvBlocking(fd->get(), &ack, 1);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fd = wire::UniqueFd();
  receiver.join();
  if (!acked || !receiver_ok) return Status(Code::kIoError, "raw loopback TCP probe failed");
  return static_cast<double>(message_bytes) * static_cast<double>(count) / seconds / 1e9;
}

}  // namespace kvtier::store
