// One child process of a test or a benchmark: exec'd from an argv (with extra environment and its
// stdout and stderr captured in a log file) or forked to run a function, and always stopped by its
// PID: SIGTERM, a deadline, then SIGKILL, and reaped. Every launcher in process/ is built on it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::process {

// The exit code a shell would show: the status of a normal exit, 128 + signal when killed.
int ExitCode(int wait_status);

struct SpawnSpec {
  // argv[0] is the program unless `program` names it: a path, exec'd as is (no $PATH search).
  std::vector<std::string> argv;
  std::string program;
  // "NAME=value" entries set on top of this process's environment.
  std::vector<std::string> env;
  // stdout and stderr are appended here; empty: a fresh file in $TMPDIR that the Child removes.
  std::string log_path;
  // False: stdout stays this process's (a child whose output the caller reads live).
  bool capture_stdout = true;
  // The kernel SIGKILLs the child when the thread that started it exits, so a crashed test or
  // bench leaves nothing behind (PR_SET_PDEATHSIG: that thread must live as long as the child).
  bool die_with_parent = true;
};

class Child {
 public:
  // fork + exec of spec.argv. Everything the child needs is prepared before fork: between fork
  // and exec only async-signal-safe calls are made (the caller may have other threads). The
  // child keeps no inherited descriptor but 0 (/dev/null), 1 and 2.
  static Result<Child> Spawn(const SpawnSpec& spec);
  // fork; the child runs `fn` and _exit()s with what it returns (an exception: 1). The child
  // must use only threads it creates itself. stdio is flushed first so nothing is written twice.
  static Result<Child> Fork(const std::function<int()>& fn, bool die_with_parent = true);

  Child() = default;
  ~Child();  // Stop(), and removes a log file it created
  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // 0 once the child has been reaped (or was never started).
  pid_t pid() const { return pid_; }
  // False once the child has exited (then it is reaped and exit_code() is set).
  bool Alive();
  // The exit code once reaped.
  std::optional<int> exit_code() const { return exit_code_; }
  // Waits up to `deadline` for the child to exit on its own; its exit code, nullopt if it still
  // runs.
  std::optional<int> WaitExit(std::chrono::milliseconds deadline);
  // SIGTERM (and SIGCONT, in case it was stopped), then up to `grace` for it to exit, then
  // SIGKILL; always reaped. Returns the exit code; idempotent.
  int Stop(std::chrono::milliseconds grace = std::chrono::seconds(5));
  // Waits up to `grace` for the child to exit on its own (a worker finishing its job), then
  // Stop(`stop_grace`). Returns the exit code.
  int Finish(std::chrono::milliseconds grace,
             std::chrono::milliseconds stop_grace = std::chrono::seconds(10));
  // SIGKILL and reap, as a crash would: nothing is flushed or cleaned up. Returns the exit code.
  int Kill();
  // Sends `sig` (SIGSTOP, SIGCONT, ...) while the child runs.
  void Signal(int sig) const;

  // Where stdout and stderr go (empty for a forked function).
  const std::string& log_path() const { return log_path_; }
  // What the child has written so far.
  std::string Log() const;
  // Its last `bytes` bytes, for error messages.
  std::string LogTail(size_t bytes = 2000) const;

 private:
  void Reaped(int wait_status);
  void Release();

  pid_t pid_ = 0;
  std::optional<int> exit_code_;
  std::string log_path_;
  bool owns_log_ = false;
};

}  // namespace kvtier::process
