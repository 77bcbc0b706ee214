// A child process a test starts (an exec'd binary, or a forked function) and always stops by
// PID: SIGTERM then wait (Stop), or SIGKILL as a crash would (Kill). The destructor stops it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace kvtier::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  // fork + execv(args[0], args).
  explicit ChildProcess(std::vector<std::string> args) {
    pid_ = ::fork();
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  // Runs fn in a forked child; its return value is the exit status. The child must only use
  // threads it creates itself.
  static ChildProcess Fork(const std::function<int()>& fn) {
    ChildProcess c;
    c.pid_ = ::fork();
    if (c.pid_ == 0) ::_exit(fn());
    return c;
  }
  ~ChildProcess() { Stop(); }
  ChildProcess(ChildProcess&& o) noexcept { *this = std::move(o); }
  ChildProcess& operator=(ChildProcess&& o) noexcept {
    if (this != &o) {
      Stop();
      pid_ = std::exchange(o.pid_, 0);
      exit_status_ = o.exit_status_;
    }
    return *this;
  }

  // Waits up to `timeout` for the child to exit on its own; its exit status, or -1 if it is
  // still running.
  int Wait(std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (pid_ > 0) {
      if (Reap()) break;
      if (std::chrono::steady_clock::now() > end) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return exit_status_;
  }

  // True while the child has not exited (reaps it if it has).
  bool Alive() { return pid_ > 0 && !Reap(); }

  // SIGTERM, then wait up to 5 s (SIGKILL after); the exit status, or -1 if it had to be killed.
  int Stop() {
    if (pid_ <= 0) return exit_status_;
    ::kill(pid_, SIGTERM);
    if (Wait(std::chrono::milliseconds(5000)) != -1 || pid_ <= 0) return exit_status_;
    Kill();
    return exit_status_ = -1;
  }

  // SIGKILL, as a crash would: nothing is flushed or cleaned up.
  void Kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
    exit_status_ = 128 + SIGKILL;
  }

  pid_t pid() const { return pid_; }

 private:
  bool Reap() {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) != pid_) return false;
    pid_ = 0;
    exit_status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return true;
  }

  pid_t pid_ = 0;
  int exit_status_ = -1;
};

}  // namespace kvtier::testing
