#include "bench/common/child_process.h"

#include "bench/common/free_port.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <thread>

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

}  // namespace

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

Result<std::unique_ptr<SpawnedProcess>> SpawnedProcess::Start(const Spec& spec) {
  std::string last_log;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const uint16_t port = FreeLoopbackPort();
    if (port == 0) return Status(Code::kIoError, "no free TCP port on 127.0.0.1");
    char path[] = "/tmp/kvtier-bench-process-XXXXXX";
    const int log_fd = ::mkstemp(path);
    if (log_fd < 0) return Status(Code::kIoError, fmt::format("mkstemp: {}", std::strerror(errno)));
    ::unlink(path);  // the descriptors keep it alive; nothing is left behind
    std::vector<std::string> args = spec.args(port);
    const std::string binary = spec.binary;
    auto pid = ForkChild([&] {
      // Keep the bench's stdout clean (--json): the process writes only to its log.
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(binary.c_str(), argv.data());
      std::fprintf(stderr, "exec %s: %s\n", binary.c_str(), std::strerror(errno));
      return 127;
    });
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

Result<std::unique_ptr<SpawnedServer>> SpawnedServer::Start(
    uint32_t chunk_size, double l1_size_gb, const std::vector<std::string>& extra_args) {
  SpawnedProcess::Spec spec;
  spec.name = "kvtier server";
  spec.binary = "/proc/self/exe";
  spec.args = [&](uint16_t port) {
    std::vector<std::string> args = {"kvtier",       "server",
                                     "--host",       "127.0.0.1",
                                     "--port",       std::to_string(port),
                                     "--http-port",  "0",
                                     "--l1-size-gb", fmt::format("{}", l1_size_gb),
                                     "--chunk-size", std::to_string(chunk_size),
                                     "--log-level",  "warn"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    return args;
  };
  // Ready once it prints its "listening" line (after every listener is bound); the L1
  // prefault before that can take seconds.
  spec.ready = [](const SpawnedProcess& p) {
    return p.Log().find("listening") != std::string::npos;
  };
  auto process = SpawnedProcess::Start(spec);
  if (!process.ok()) return process.status();
  return std::unique_ptr<SpawnedServer>(new SpawnedServer(std::move(process).value()));
}

}  // namespace kvtier::bench
