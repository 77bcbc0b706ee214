// A child process a test starts (an exec'd binary, or a forked function) and always stops by
// PID: the test-facing handle over process::Child. Stop() is SIGTERM then wait, Kill() is SIGKILL
// as a crash would; the destructor stops it.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/process/child.h"

namespace kvtier::testing {

class ChildProcess {
 public:
  ChildProcess() = default;
  // fork + execv(args[0], args); stdout and stderr go to a private log (Log()), so a failing test
  // can print them.
  explicit ChildProcess(std::vector<std::string> args) {
    process::SpawnSpec spec;
    spec.argv = std::move(args);
    Adopt(process::Child::Spawn(spec));
  }
  explicit ChildProcess(process::Child child) : child_(std::move(child)) {}
  // Runs fn in a forked child; its return value is the exit status. The child must only use
  // threads it creates itself.
  static ChildProcess Fork(const std::function<int()>& fn) {
    ChildProcess c;
    c.Adopt(process::Child::Fork(fn, /*die_with_parent=*/false));
    return c;
  }

  // Waits up to `timeout` for the child to exit on its own; its exit status, or -1 if it is
  // still running.
  int Wait(std::chrono::milliseconds timeout) { return child_.WaitExit(timeout).value_or(-1); }
  // True while the child has not exited (reaps it if it has).
  bool Alive() { return child_.Alive(); }
  // SIGTERM, then up to 5 s (SIGKILL after); the exit status (128 + signal when killed).
  int Stop() { return child_.Stop(std::chrono::seconds(5)); }
  // SIGKILL, as a crash would: nothing is flushed or cleaned up.
  void Kill() { child_.Kill(); }
  pid_t pid() const { return child_.pid(); }
  std::string Log() const { return child_.Log(); }
  process::Child& child() { return child_; }

 private:
  void Adopt(Result<process::Child> child) {
    if (child.ok()) {
      child_ = std::move(child).value();
    } else {
      ADD_FAILURE() << child.status().ToString();
    }
  }

  process::Child child_;
};

}  // namespace kvtier::testing
