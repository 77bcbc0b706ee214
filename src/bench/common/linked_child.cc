#include "bench/common/linked_child.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "bench/common/child_process.h"

namespace kvtier::bench {

Result<std::unique_ptr<LinkedChild>> LinkedChild::Fork(const std::function<int(int, int)>& fn) {
  int down[2], up[2];
  // Close-on-exec: processes exec'd later (nodes, redis) must not hold these pipes.
  if (::pipe2(down, O_CLOEXEC) != 0) return Status(Code::kIoError, "pipe");
  if (::pipe2(up, O_CLOEXEC) != 0) {
    ::close(down[0]);
    ::close(down[1]);
    return Status(Code::kIoError, "pipe");
  }
  auto pid = ForkChild([&] {
    ::close(down[1]);
    ::close(up[0]);
    return fn(down[0], up[1]);
  });
  ::close(down[0]);
  ::close(up[1]);
  if (!pid.ok()) {
    ::close(down[1]);
    ::close(up[0]);
    return pid.status();
  }
  return std::unique_ptr<LinkedChild>(new LinkedChild(*pid, down[1], up[0]));
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
    if (exited_) {
      return Status(Code::kUnavailable,
                    fmt::format("child {} exited with code {}", pid_, exit_code_));
    }
    if (auto code = TryReap(pid_)) {
      exit_code_ = *code;
      exited_ = true;
    }
  }
}

int LinkedChild::Finish(std::chrono::milliseconds grace) {
  if (to_fd_ >= 0) ::close(to_fd_);
  if (from_fd_ >= 0) ::close(from_fd_);
  to_fd_ = from_fd_ = -1;
  if (!exited_) {
    exit_code_ = StopChild(pid_, grace);
    exited_ = true;
  }
  return exit_code_;
}

bool WriteLine(int fd, const std::string& line) {
  std::string out = line + "\n";
  const char* p = out.data();
  size_t left = out.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    left -= static_cast<size_t>(n);
  }
  return true;
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
