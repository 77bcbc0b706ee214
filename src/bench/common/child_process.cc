// Forking, reaping, stopping and talking to the benches' child processes (child_process.h).
#include "bench/common/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

#include "common/free_port.h"

namespace kvtier::bench {

namespace {

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

// Waits up to `limit` for the child; nullopt if it is still running.
std::optional<int> WaitFor(pid_t pid, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    if (auto code = TryReap(pid)) return code;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// In a forked child: stdout and stderr to `out_fd`, then exec `binary` with argv `args`. Returns
// (for the child's exit code) only when the exec failed.
int ExecWithOutput(const std::string& binary, std::vector<std::string> args, int out_fd) {
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(out_fd, STDERR_FILENO);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execv(binary.c_str(), argv.data());
  std::fprintf(stderr, "exec %s: %s\n", binary.c_str(), std::strerror(errno));
  return 127;
}

}  // namespace

Result<pid_t> ForkChild(const std::function<int()>& fn) {
  // Unflushed output would otherwise be written twice, once by each process.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status(Code::kIoError, fmt::format("fork: {}", std::strerror(errno)));
  if (pid > 0) return pid;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(1);  // the parent died before prctl took effect
  int code = 1;
  try {
    code = fn();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench child %d: %s\n", ::getpid(), e.what());
  }
  std::cout.flush();
  std::fflush(nullptr);
  ::_exit(code);
}

std::optional<int> TryReap(pid_t pid) {
  int st = 0;
  const pid_t r = ::waitpid(pid, &st, WNOHANG);
  if (r == pid) return ExitCode(st);
  if (r < 0 && errno == ECHILD) return 1;  // already reaped elsewhere: treat as gone
  return std::nullopt;
}

int StopChild(pid_t pid, std::chrono::milliseconds grace) {
  if (auto code = WaitFor(pid, grace)) return *code;
  ::kill(pid, SIGTERM);
  if (auto code = WaitFor(pid, std::chrono::seconds(10))) return *code;
  ::kill(pid, SIGKILL);
  int st = 0;
  ::waitpid(pid, &st, 0);
  return ExitCode(st);
}

Result<std::pair<int, std::string>> RunCapture(const std::vector<std::string>& args,
                                               std::chrono::milliseconds limit) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return Status(Code::kIoError, "pipe");
  auto pid = ForkChild([&] { return ExecWithOutput(args[0], args, p[1]); });
  ::close(p[1]);
  if (!pid.ok()) {
    ::close(p[0]);
    return pid.status();
  }
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(p[0], buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  const int code = StopChild(*pid, limit);
  return std::make_pair(code, out);
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

Result<std::unique_ptr<SpawnedProcess>> SpawnedProcess::Start(const Spec& spec) {
  std::string last_log;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint16_t port = FreeLoopbackPort();
    if (port == 0) return Status(Code::kIoError, "no free TCP port on 127.0.0.1");
    char path[] = "/tmp/kvtier-bench-process-XXXXXX";
    const int log_fd = ::mkstemp(path);
    if (log_fd < 0) return Status(Code::kIoError, fmt::format("mkstemp: {}", std::strerror(errno)));
    ::unlink(path);  // the descriptors keep it alive; nothing is left behind
    // In this process: a spec's args may note the port it chose (a node's HTTP port).
    const std::vector<std::string> args = spec.args(port);
    // Keep the bench's stdout clean (--json): the process writes only to its log.
    auto pid = ForkChild([&] { return ExecWithOutput(spec.binary, args, log_fd); });
    if (!pid.ok()) {
      ::close(log_fd);
      return pid.status();
    }
    std::unique_ptr<SpawnedProcess> process(new SpawnedProcess(*pid, port, log_fd));
    const auto deadline = std::chrono::steady_clock::now() + spec.timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (spec.ready(*process)) return process;
      if (auto code = TryReap(process->pid_)) {
        process->pid_ = 0;
        process->exit_code_ = *code;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    last_log = process->Log();
    if (process->pid_ != 0) {
      process->Stop();
      return Status(Code::kTimeout, fmt::format("{} did not start within {} s: {}", spec.name,
                                                spec.timeout.count(), last_log));
    }
  }
  return Status(Code::kUnavailable, fmt::format("{} failed to start: {}", spec.name, last_log));
}

SpawnedProcess::~SpawnedProcess() {
  Stop();
  ::close(log_fd_);
}

int SpawnedProcess::Stop() {
  if (pid_ <= 0) return exit_code_;
  ::kill(pid_, SIGTERM);
  exit_code_ = StopChild(pid_, std::chrono::seconds(10));
  pid_ = 0;
  return exit_code_;
}

bool SpawnedProcess::Alive() {
  if (pid_ <= 0) return false;
  if (auto code = TryReap(pid_)) {
    pid_ = 0;
    exit_code_ = *code;
    return false;
  }
  return true;
}

std::string SpawnedProcess::Log() const {
  std::string out;
  char buf[4096];
  off_t off = 0;
  while (true) {
    const ssize_t n = ::pread(log_fd_, buf, sizeof(buf), off);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
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
