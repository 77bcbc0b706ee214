// Spawning, waiting for, stopping and reaping one child process (child.h).
#include "common/process/child.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <utility>

extern char** environ;

namespace kvtier::process {

namespace {

Status Errno(const std::string& what) {
  return Status(Code::kIoError, fmt::format("{}: {}", what, std::strerror(errno)));
}

// Pointers into `strings` with a terminating null, as execve wants them.
std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// This process's environment with `extra` ("NAME=value") replacing or adding entries.
std::vector<std::string> MergedEnvironment(const std::vector<std::string>& extra) {
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e);
    const std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& x : extra) replaced |= x.substr(0, x.find('=')) == name;
    if (!replaced) out.push_back(entry);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

// A new empty file in $TMPDIR (or /tmp) for a child's output.
Result<std::string> TempLogPath(const std::string& program) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string base = program.substr(program.rfind('/') + 1);
  std::string path = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kvtier-" +
                     base + "-XXXXXX.log";
  const int fd = ::mkstemps(path.data(), 4);
  if (fd < 0) return Errno("mkstemps " + path);
  ::close(fd);
  return path;
}

// In the child, after fork: only async-signal-safe calls from here on.
[[noreturn]] void ExecChild(pid_t parent, bool die_with_parent, int null_fd, int log_fd,
                            bool capture_stdout, const char* program, char* const* argv,
                            char* const* envp) {
  if (die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);  // the parent died before prctl took effect
  }
  ::dup2(null_fd, STDIN_FILENO);
  if (log_fd >= 0) {
    if (capture_stdout) ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
  }
  // The child must not hold the caller's sockets and pipes (a killed peer would look alive).
  if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
    for (int fd = 3; fd < 65536; ++fd) ::close(fd);
  }
  ::execve(program, argv, envp);
  static const char kFailed[] = "exec failed\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kFailed, sizeof(kFailed) - 1);
  ::_exit(127);
}

// Waits until `pid` has exited or `deadline` passes, without reaping it. A pidfd wakes us the
// moment it exits; where pidfd_open is missing, a short poll loop does.
void WaitExitable(pid_t pid, std::chrono::milliseconds deadline) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    pollfd p{pidfd, POLLIN, 0};
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (true) {
      // Rounded up: poll() may return a little early, never before the deadline.
      const auto left =
          std::chrono::ceil<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      const int r = ::poll(&p, 1, static_cast<int>(left.count()));
      if (r != 0 && !(r < 0 && errno == EINTR)) break;
    }
    ::close(pidfd);
    return;
  }
  siginfo_t info{};
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    info.si_pid = 0;
    if (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) != 0 ||
        info.si_pid != 0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

}  // namespace

int ExitCode(int wait_status) {
  if (WIFEXITED(wait_status)) return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status)) return 128 + WTERMSIG(wait_status);
  return 1;
}

Result<Child> Child::Spawn(const SpawnSpec& spec) {
  if (spec.argv.empty()) return Status(Code::kInvalidArgument, "spawn: empty argv");
  const std::string program = spec.program.empty() ? spec.argv[0] : spec.program;
  Child child;
  if (spec.log_path.empty()) {
    auto path = TempLogPath(spec.argv[0]);
    if (!path.ok()) return path.status();
    child.log_path_ = *path;
    child.owns_log_ = true;
  } else {
    child.log_path_ = spec.log_path;
  }
  const int log_fd =
      ::open(child.log_path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) return Errno("open " + child.log_path_);
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null_fd < 0) {
    ::close(log_fd);
    return Errno("open /dev/null");
  }
  std::vector<std::string> args = spec.argv;
  std::vector<std::string> env = MergedEnvironment(spec.env);
  const std::vector<char*> argv = CStrings(args);
  const std::vector<char*> envp = CStrings(env);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ExecChild(parent, spec.die_with_parent, null_fd, log_fd, spec.capture_stdout, program.c_str(),
              argv.data(), envp.data());
  }
  ::close(log_fd);
  ::close(null_fd);
  if (pid < 0) return Errno("fork");
  child.pid_ = pid;
  return child;
}

Result<Child> Child::Fork(const std::function<int()>& fn, bool die_with_parent) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Errno("fork");
  if (pid == 0) {
    if (die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);
    }
    int code = 1;
    try {
      code = fn();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child %d: %s\n", ::getpid(), e.what());
    }
    std::cout.flush();
    std::fflush(nullptr);
    ::_exit(code);
  }
  Child child;
  child.pid_ = pid;
  return child;
}

Child::~Child() { Release(); }

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
  if (this != &other) {
    Release();
    pid_ = std::exchange(other.pid_, 0);
    exit_code_ = std::exchange(other.exit_code_, std::nullopt);
    log_path_ = std::exchange(other.log_path_, std::string());
    owns_log_ = std::exchange(other.owns_log_, false);
  }
  return *this;
}

void Child::Release() {
  Stop();
  if (owns_log_) std::remove(log_path_.c_str());
  owns_log_ = false;
}

void Child::Reaped(int wait_status) {
  pid_ = 0;
  exit_code_ = ExitCode(wait_status);
}

bool Child::Alive() {
  if (pid_ <= 0) return false;
  int st = 0;
  const pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    Reaped(st);
    return false;
  }
  if (r < 0 && errno == ECHILD) {  // reaped elsewhere: gone, its code unknown
    pid_ = 0;
    exit_code_ = 1;
    return false;
  }
  return true;
}

std::optional<int> Child::WaitExit(std::chrono::milliseconds deadline) {
  if (pid_ > 0 && Alive()) WaitExitable(pid_, deadline);
  if (pid_ > 0 && Alive()) return std::nullopt;
  return exit_code_;
}

int Child::Stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return exit_code_.value_or(-1);
  ::kill(pid_, SIGTERM);
  ::kill(pid_, SIGCONT);
  if (auto code = WaitExit(grace)) return *code;
  return Kill();
}

int Child::Finish(std::chrono::milliseconds grace, std::chrono::milliseconds stop_grace) {
  if (auto code = WaitExit(grace)) return *code;
  return Stop(stop_grace);
}

int Child::Kill() {
  if (pid_ <= 0) return exit_code_.value_or(-1);
  ::kill(pid_, SIGKILL);
  int st = 0;
  pid_t r;
  while ((r = ::waitpid(pid_, &st, 0)) < 0 && errno == EINTR) {
  }
  if (r == pid_) {
    Reaped(st);
  } else {
    pid_ = 0;
    exit_code_ = 128 + SIGKILL;
  }
  return *exit_code_;
}

void Child::Signal(int sig) const {
  if (pid_ > 0) ::kill(pid_, sig);
}

std::string Child::Log() const {
  if (log_path_.empty()) return "";
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Child::LogTail(size_t bytes) const {
  std::string log = Log();
  return log.size() > bytes ? log.substr(log.size() - bytes) : log;
}

}  // namespace kvtier::process
