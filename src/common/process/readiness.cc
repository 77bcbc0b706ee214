// Deadline waits and readiness probes (readiness.h).
#include "common/process/readiness.h"

#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace kvtier::process {

bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds deadline,
             std::chrono::milliseconds every) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(every);
  }
  return done();
}

Status WaitReady(Child& child, const std::function<bool()>& ready,
                 std::chrono::milliseconds deadline, std::string_view what) {
  bool exited = false;
  const bool up = WaitFor(
      [&] {
        exited = !child.Alive();
        return exited || ready();
      },
      deadline);
  if (up && !exited) return Status::Ok();
  if (exited) {
    return Status(Code::kUnavailable,
                  fmt::format("{} exited with code {} before it was ready; log tail:\n{}", what,
                              child.exit_code().value_or(-1), child.LogTail()));
  }
  return Status(Code::kTimeout, fmt::format("{} was not ready within {} ms; log tail:\n{}", what,
                                            deadline.count(), child.LogTail()));
}

int ConnectLoopback(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

bool PortAccepts(uint16_t port) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

namespace {

httplib::Result Get(uint16_t port, const std::string& path, const std::string& bearer,
                    std::chrono::milliseconds timeout) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(timeout);
  c.set_read_timeout(timeout);
  if (!bearer.empty()) c.set_bearer_token_auth(bearer);
  return c.Get(path);
}

}  // namespace

int HttpStatus(uint16_t port, const std::string& path, const std::string& bearer,
               std::chrono::milliseconds timeout) {
  auto res = Get(port, path, bearer, timeout);
  return res ? res->status : -1;
}

std::string HttpBody(uint16_t port, const std::string& path, const std::string& bearer,
                     std::chrono::milliseconds timeout) {
  auto res = Get(port, path, bearer, timeout);
  return res && res->status == 200 ? res->body : std::string();
}

bool LogContains(const Child& child, std::string_view text) {
  return child.Log().find(text) != std::string::npos;
}

}  // namespace kvtier::process
