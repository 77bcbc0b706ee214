// Stream-socket transport of the dummy protocol: abstract AF_UNIX listen/connect, whole-frame
// send with an optional SCM_RIGHTS fd, one-frame-at-a-time receive that collects any fds.
#include "store/protocol/dummy_socket.h"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "store/protocol/dummy_protocol.h"

namespace kvtier::store::dummy {
namespace {

constexpr size_t kMaxFdsPerRead = 4;

Status Errno(const std::string& what) {
  const int e = errno;
  if (e == EAGAIN || e == EWOULDBLOCK) return Status(Code::kTimeout, what + ": timed out");
  return Status(Code::kIoError, fmt::format("{}: {}", what, std::strerror(e)));
}

timeval ToTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
  return tv;
}

// Reads exactly `len` bytes into `buf`, collecting fds. Returns the bytes read before a clean
// EOF (len on success).
Result<size_t> ReadExact(int fd, uint8_t* buf, size_t len, std::vector<wire::UniqueFd>& fds) {
  size_t got = 0;
  while (got < len) {
    iovec iov{buf + got, len - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerRead)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("recvmsg");
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        fds.emplace_back(passed);
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      return Status(Code::kProtocolError,
                    fmt::format("more than {} file descriptors in one frame", kMaxFdsPerRead));
    }
    if (n == 0) return got;
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace

Result<wire::UniqueFd> ListenSocket(const std::string& abstract_name) {
  wire::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  sockaddr_un addr;
  const socklen_t len = wire::AbstractAddr(abstract_name, addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return Errno(fmt::format("bind unix socket @{}", abstract_name));
  }
  if (::listen(fd.get(), 128) != 0) return Errno("listen");
  return fd;
}

Result<wire::UniqueFd> ConnectSocket(const std::string& abstract_name) {
  wire::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Errno("socket");
  sockaddr_un addr;
  const socklen_t len = wire::AbstractAddr(abstract_name, addr);
  int rc;
  do {
    rc = ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len);
  } while (rc != 0 && errno == EINTR);
  if (rc != 0) {
    const Status s = Errno(fmt::format("connect unix socket @{}", abstract_name));
    return Status(Code::kUnavailable, s.message());
  }
  return fd;
}

Status SetSocketTimeouts(int fd, std::chrono::milliseconds recv, std::chrono::milliseconds send) {
  const timeval r = ToTimeval(recv);
  const timeval s = ToTimeval(send);
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &r, sizeof(r)) != 0 ||
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &s, sizeof(s)) != 0) {
    return Errno("setsockopt timeouts");
  }
  return Status::Ok();
}

Status SendFrame(int fd, const std::string& frame, int pass_fd) {
  size_t sent = 0;
  while (sent < frame.size()) {
    iovec iov{const_cast<char*>(frame.data()) + sent, frame.size() - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    if (sent == 0 && pass_fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    const ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (sent == 0 && (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)) {
        return Status(Code::kUnavailable, fmt::format("send: {}", std::strerror(errno)));
      }
      return Errno(fmt::format("send (after {} of {} bytes)", sent, frame.size()));
    }
    sent += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<std::optional<Frame>> RecvFrame(int fd, uint32_t max_length) {
  Frame frame;
  uint8_t header[kFrameHeaderBytes];
  auto got = ReadExact(fd, header, sizeof(header), frame.fds);
  if (!got.ok()) return got.status();
  if (*got == 0) return std::optional<Frame>();
  if (*got < sizeof(header)) {
    return Status(Code::kProtocolError,
                  fmt::format("truncated frame: connection closed after {} header bytes", *got));
  }
  auto h = DecodeFrameHeader(header, max_length);
  if (!h.ok()) return h.status();
  frame.type = h->type;
  // The buffer grows with the bytes that actually arrive, so a header that merely claims a
  // large body costs no large allocation.
  size_t have = 0;
  while (have < h->length) {
    const size_t chunk = std::min<size_t>(h->length - have, std::max<size_t>(have, 64 << 10));
    frame.body.resize(have + chunk);
    got = ReadExact(fd, reinterpret_cast<uint8_t*>(frame.body.data()) + have, chunk, frame.fds);
    if (!got.ok()) return got.status();
    have += *got;
    if (*got < chunk) {
      return Status(Code::kProtocolError,
                    fmt::format("truncated frame: connection closed after {} of {} body bytes",
                                have, h->length));
    }
  }
  return std::optional<Frame>(std::move(frame));
}

}  // namespace kvtier::store::dummy
