// TCP helpers for the data plane (see tcp_io.h).
#include "store/transport/tcp_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <memory>

namespace kvtier::store::tcp {
namespace {

std::string Errno(int err) { return std::strerror(err); }

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

Result<AddrInfoPtr> Resolve(const std::string& host, uint16_t port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status(Code::kInvalidArgument, fmt::format("cannot resolve host '{}': {}", host,
                                                      rc != 0 ? gai_strerror(rc) : "no address"));
  }
  return AddrInfoPtr(res);
}

// Waits until `fd` is ready for `events` or the deadline passes.
Status WaitFor(int fd, short events, Deadline deadline, const char* what) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, PollTimeoutMs(deadline));
    if (rc > 0) return Status::Ok();
    if (rc == 0) return Status(Code::kTimeout, fmt::format("{} timed out", what));
    if (errno != EINTR) return Status(Code::kIoError, fmt::format("poll: {}", Errno(errno)));
  }
}

}  // namespace

int PollTimeoutMs(Deadline deadline) {
  const auto left = deadline - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) return 0;
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
}

void SetNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Result<Endpoint> ParseEndpoint(std::string_view text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return Status(Code::kInvalidArgument, fmt::format("endpoint '{}' is not host:port", text));
  }
  std::string_view host = text.substr(0, colon);
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  unsigned port = 0;
  const auto [end, ec] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || end != port_text.data() + port_text.size() || port == 0 ||
      port > 65535 || host.empty()) {
    return Status(Code::kInvalidArgument, fmt::format("endpoint '{}' is not host:port", text));
  }
  return Endpoint{std::string(host), static_cast<uint16_t>(port)};
}

Result<wire::UniqueFd> Listen(const std::string& host, uint16_t port, int backlog) {
  if (host.empty()) return Status(Code::kInvalidArgument, "listen host is empty");
  auto addrs = Resolve(host, port, /*passive=*/false);
  if (!addrs.ok()) return addrs.status();
  std::string last_error = "no address";
  for (addrinfo* ai = addrs->get(); ai != nullptr; ai = ai->ai_next) {
    wire::UniqueFd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!fd.valid()) {
      last_error = Errno(errno);
      continue;
    }
    int one = 1;
    (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (::bind(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(fd.get(), backlog) != 0) {
      last_error = Errno(errno);
      continue;
    }
    return fd;
  }
  return Status(Code::kIoError, fmt::format("listen on {}:{}: {}", host, port, last_error));
}

Result<uint16_t> LocalPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Status(Code::kIoError, fmt::format("getsockname: {}", Errno(errno)));
  }
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return Status(Code::kInternal, "listener is not an IP socket");
}

Result<wire::UniqueFd> Connect(const std::string& endpoint, Deadline deadline) {
  auto ep = ParseEndpoint(endpoint);
  if (!ep.ok()) return ep.status();
  auto addrs = Resolve(ep->host, ep->port, /*passive=*/false);
  if (!addrs.ok()) return addrs.status();
  Status last(Code::kIoError, "no address");
  for (addrinfo* ai = addrs->get(); ai != nullptr; ai = ai->ai_next) {
    wire::UniqueFd fd(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!fd.valid()) {
      last = Status(Code::kIoError, fmt::format("socket: {}", Errno(errno)));
      continue;
    }
    SetNoDelay(fd.get());
    if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
      if (errno != EINPROGRESS) {
        last = Status(Code::kIoError, fmt::format("connect to {}: {}", endpoint, Errno(errno)));
        continue;
      }
      Status waited = WaitFor(fd.get(), POLLOUT, deadline, "connect");
      if (!waited.ok()) {
        last = Status(waited.code(), fmt::format("connect to {}: {}", endpoint, waited.message()),
                      waited.detail());
        if (waited.code() == Code::kTimeout) return last;
        continue;
      }
      int err = 0;
      socklen_t len = sizeof(err);
      (void)::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        last = Status(Code::kIoError, fmt::format("connect to {}: {}", endpoint, Errno(err)));
        continue;
      }
    }
    return fd;
  }
  return last;
}

Status SendAll(int fd, const void* data, size_t len, Deadline deadline) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      KVT_RETURN_IF_ERROR(WaitFor(fd, POLLOUT, deadline, "send"));
      continue;
    }
    return Status(Code::kIoError, fmt::format("send: {}", n < 0 ? Errno(errno) : "closed"));
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, size_t len, Deadline deadline) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::recv(fd, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status(Code::kIoError, "connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      KVT_RETURN_IF_ERROR(WaitFor(fd, POLLIN, deadline, "recv"));
      continue;
    }
    return Status(Code::kIoError, fmt::format("recv: {}", Errno(errno)));
  }
  return Status::Ok();
}

std::string PeerName(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  char host[NI_MAXHOST] = "?";
  char port[NI_MAXSERV] = "?";
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    (void)getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), port,
                      sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
  }
  return fmt::format("{}:{}", host, port);
}

}  // namespace kvtier::store::tcp
