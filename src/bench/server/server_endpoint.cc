// --server parsing and the reachability check (server_endpoint.h).
#include "bench/server/server_endpoint.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

namespace kvtier::bench {

std::optional<std::pair<std::string, uint16_t>> ParseEndpoint(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  try {
    const int port = std::stoi(s.substr(colon + 1));
    if (port <= 0 || port > 65535) return std::nullopt;
    return std::make_pair(s.substr(0, colon), static_cast<uint16_t>(port));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Status CheckTcpReachable(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (const int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return Status(Code::kInvalidArgument, fmt::format("{}: {}", host, ::gai_strerror(rc)));
  }
  int err = ECONNREFUSED;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    const bool ok = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    err = errno;
    ::close(fd);
    if (ok) {
      ::freeaddrinfo(found);
      return Status::Ok();
    }
  }
  ::freeaddrinfo(found);
  return Status(Code::kUnavailable,
                fmt::format("cannot connect to {}:{}: {}", host, port, std::strerror(err)));
}

}  // namespace kvtier::bench
