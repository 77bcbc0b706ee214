// What the tests' real servers (support/redis_process.h, support/etcd_process.h) share: a temp
// dir that holds the log (removed at the end), fork + exec with stdout and stderr appended to the
// log, and stopping by PID. The child is SIGKILLed when the thread that started it exits
// (PR_SET_PDEATHSIG), so a crashed test leaves no server behind.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kvtier::testing {

class LoggedServer {
 public:
  ~LoggedServer() {
    Stop();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }
  LoggedServer(const LoggedServer&) = delete;
  LoggedServer& operator=(const LoggedServer&) = delete;

  pid_t pid() const { return pid_; }
  std::string log_path() const { return dir_ + "/" + log_name_; }

  // SIGKILL and reap: the server vanishes as in a crash (clients see resets).
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    pid_ = 0;
  }

  // SIGTERM (and SIGCONT, in case a test stopped it); SIGKILL if still alive after 5 s.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::kill(pid_, SIGCONT);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < until) {
      if (Exited()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    Kill();
  }

 protected:
  // `what` names the server in messages; the log is dir/log_name.
  LoggedServer(const char* what, const char* log_name) : what_(what), log_name_(log_name) {}

  bool MakeTempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/kvtier-" +
                       log_name_.substr(0, log_name_.find('.')) + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "%s: mkdtemp(%s): %s\n", what_, tmpl.c_str(), std::strerror(errno));
      return false;
    }
    dir_ = tmpl;
    return true;
  }

  // fork + exec of args[0]. Everything the child needs is prepared before fork: between fork and
  // exec only async-signal-safe calls are allowed (the test process may have other threads).
  bool Spawn(std::vector<std::string> args) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = log_path();
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::fprintf(stderr, "%s: fork: %s\n", what_, std::strerror(errno));
      return false;
    }
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(126);  // the parent is already gone
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      int null = ::open("/dev/null", O_RDONLY);
      if (fd < 0 || null < 0) ::_exit(126);
      ::dup2(null, 0);
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      // Close every inherited descriptor (sockets, eventfds of the test) so the server does not
      // keep them open; fall back to a loop where close_range is missing.
      if (::syscall(SYS_close_range, 3U, ~0U, 0U) != 0) {
        for (int i = 3; i < 65536; ++i) ::close(i);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    return true;
  }

  // True (and the pid forgotten) when the child has exited or was never started.
  bool Exited() {
    int st = 0;
    if (pid_ > 0 && ::waitpid(pid_, &st, WNOHANG) != pid_) return false;
    pid_ = 0;
    return true;
  }

  // Prints why (`what`, with `where`: its ports) and the last 2000 bytes of the log.
  void Report(const char* what, const std::string& where) const {
    std::ifstream in(log_path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string log = ss.str();
    if (log.size() > 2000) log = log.substr(log.size() - 2000);
    std::fprintf(stderr, "%s: %s (%s); log tail:\n%s\n", what_, what, where.c_str(), log.c_str());
  }

  std::string dir_;
  pid_t pid_ = 0;

 private:
  const char* what_;
  std::string log_name_;
};

}  // namespace kvtier::testing
