// The benches' captured runs, spawned processes and linked children (child_process.h).
#include "bench/common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "common/free_port.h"
#include "common/process/readiness.h"

namespace kvtier::bench {

Result<std::pair<int, std::string>> RunCapture(const std::vector<std::string>& args,
                                               std::chrono::milliseconds limit) {
  process::SpawnSpec spec;
  spec.argv = args;
  auto child = process::Child::Spawn(spec);
  if (!child.ok()) return child.status();
  const int code = child->Finish(limit);
  return std::make_pair(code, child->Log());
}

bool WriteAll(int fd, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

Result<std::unique_ptr<LinkedChild>> LinkedChild::Fork(const std::function<int(int, int)>& fn) {
  int down[2], up[2];
  // Close-on-exec: processes exec'd later (nodes, redis) must not hold these pipes.
  if (::pipe2(down, O_CLOEXEC) != 0) return Status(Code::kIoError, "pipe");
  if (::pipe2(up, O_CLOEXEC) != 0) {
    ::close(down[0]);
    ::close(down[1]);
    return Status(Code::kIoError, "pipe");
  }
  auto child = process::Child::Fork([&] {
    ::close(down[1]);
    ::close(up[0]);
    return fn(down[0], up[1]);
  });
  ::close(down[0]);
  ::close(up[1]);
  if (!child.ok()) {
    ::close(down[1]);
    ::close(up[0]);
    return child.status();
  }
  return std::unique_ptr<LinkedChild>(new LinkedChild(std::move(child).value(), down[1], up[0]));
}

LinkedChild::~LinkedChild() { Finish(std::chrono::seconds(1)); }

Status LinkedChild::Send(const std::string& line) {
  if (to_fd_ < 0) return Status(Code::kUnavailable, "child already finished");
  if (!WriteLine(to_fd_, line)) {
    return Status(Code::kIoError, fmt::format("child {}: write: {}", pid_, std::strerror(errno)));
  }
  return Status::Ok();
}

Result<nlohmann::json> LinkedChild::Receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool exited = false;
  while (true) {
    const size_t nl = buffered_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffered_.substr(0, nl);
      buffered_.erase(0, nl + 1);
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded()) {
        return Status(Code::kInternal, fmt::format("child {}: not JSON: {}", pid_, line));
      }
      return j;
    }
    if (from_fd_ < 0) return Status(Code::kUnavailable, "child already finished");
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status(Code::kTimeout, fmt::format("child {}: no answer within {} ms", pid_,
                                                timeout.count()));
    }
    pollfd p{from_fd_, POLLIN, 0};
    bool got_data = false;
    if (::poll(&p, 1, 100) > 0) {
      char buf[65536];
      const ssize_t n = ::read(from_fd_, buf, sizeof(buf));
      if (n > 0) buffered_.append(buf, static_cast<size_t>(n));
      got_data = n > 0 || (n < 0 && errno == EINTR);
    }
    if (got_data) continue;
    // Nothing (more) to read: has the child gone? (A sibling may hold the pipe open, so EOF is
    // not a reliable sign.) Once it has, one more pass reads what it wrote before exiting.
    if (exited) {
      return Status(Code::kUnavailable, fmt::format("child {} exited with code {}", pid_,
                                                    child_.exit_code().value_or(-1)));
    }
    exited = !child_.Alive();
  }
}

int LinkedChild::Finish(std::chrono::milliseconds grace) {
  if (to_fd_ >= 0) ::close(to_fd_);
  if (from_fd_ >= 0) ::close(from_fd_);
  to_fd_ = from_fd_ = -1;
  return child_.Finish(grace);
}

JsonChildResult RunJsonChild(const std::function<nlohmann::json()>& body,
                             std::chrono::milliseconds limit, std::chrono::milliseconds grace) {
  auto child = LinkedChild::Fork(
      [&body](int, int out_fd) { return WriteLine(out_fd, body().dump()) ? 0 : 1; });
  if (!child.ok()) return {Status(child.status().code(), "fork: " + child.status().message()), -1};
  JsonChildResult out{(*child)->Receive(limit), -1};
  out.exit_code = (*child)->Finish(grace);
  return out;
}

bool WriteLine(int fd, const std::string& line) {
  const std::string out = line + "\n";
  return WriteAll(fd, out.data(), out.size());
}

std::optional<std::string> ReadLine(int fd, std::string& buffer) {
  while (true) {
    const size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return line;
    }
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace kvtier::bench
