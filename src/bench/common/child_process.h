// Child processes for the benchmarks, all launched and stopped here: forked workers and probes;
// programs run to completion with their output captured (redis-benchmark); processes (`kvtier
// server`, `kvtier master`, `kvtier node`, redis-server) started on free ports with their output
// in a private log; and forked children driven step by step over two pipes (LinkedChild). Every
// child gets SIGTERM if the bench dies and is always stopped by PID.
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace kvtier::bench {

// Forks; the child runs `fn` and _exit()s with its result (it never returns to the caller's
// stack). The child gets SIGTERM if the parent dies, so nothing outlives a crashed bench.
Result<pid_t> ForkChild(const std::function<int()>& fn);

// The child's exit code once it has exited (128 + signal when killed), nullopt while it runs.
std::optional<int> TryReap(pid_t pid);

// Waits up to `grace` for the child to exit, then SIGTERM, then SIGKILL; returns the exit code.
int StopChild(pid_t pid, std::chrono::milliseconds grace);

// Runs args[0] (argv = args) with stdout and stderr into one pipe until it exits, at most
// `limit` (then it is stopped); returns (exit code, output).
Result<std::pair<int, std::string>> RunCapture(const std::vector<std::string>& args,
                                               std::chrono::milliseconds limit);

// Whole-buffer I/O on a pipe to or from a child (EINTR and short transfers retried); false on an
// error or end of file.
bool WriteAll(int fd, const void* data, size_t n);
bool ReadAll(int fd, void* data, size_t n);

// A process exec'd on a free loopback port, its stdout and stderr in a private (unlinked) log.
class SpawnedProcess {
 public:
  struct Spec {
    std::string name;    // for messages, e.g. "kvtier master"
    std::string binary;  // what to exec, e.g. /proc/self/exe
    // argv (argv[0] included) for the free port chosen.
    std::function<std::vector<std::string>(uint16_t port)> args;
    // Polled every 10 ms until it holds (the process is ready) or `timeout` passes.
    std::function<bool(const SpawnedProcess&)> ready;
    std::chrono::seconds timeout{120};
  };

  // A free port can be taken between the probe and the bind, so a process that exits before it
  // is ready is tried again on another port (3 attempts).
  static Result<std::unique_ptr<SpawnedProcess>> Start(const Spec& spec);
  ~SpawnedProcess();
  SpawnedProcess(const SpawnedProcess&) = delete;
  SpawnedProcess& operator=(const SpawnedProcess&) = delete;

  // SIGTERM and wait (SIGKILL after 10 s). Returns the exit code; idempotent.
  int Stop();
  // False once the process has exited (it is reaped; Stop() then returns its exit code).
  bool Alive();
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string Log() const;

 private:
  SpawnedProcess(pid_t pid, uint16_t port, int log_fd) : pid_(pid), port_(port), log_fd_(log_fd) {}

  pid_t pid_;
  uint16_t port_;
  int log_fd_;
  int exit_code_ = -1;
};

// A forked child that the parent drives step by step: command lines down one pipe, one JSON line
// back per command up the other. Lock-step control is what lets several dummy processes start
// each timed phase together, and keeps the bench process free of threads and ZMQ (every ZMQ
// context and client thread lives in a child).
class LinkedChild {
 public:
  // Forks; the child runs fn(in_fd, out_fd) and exits with its result.
  static Result<std::unique_ptr<LinkedChild>> Fork(const std::function<int(int, int)>& fn);
  ~LinkedChild();  // Finish(1 s)
  LinkedChild(const LinkedChild&) = delete;
  LinkedChild& operator=(const LinkedChild&) = delete;

  Status Send(const std::string& line);
  // The child's next line as JSON. An error when the child exits (or `timeout` passes) first, or
  // the line is not JSON.
  Result<nlohmann::json> Receive(std::chrono::milliseconds timeout);
  // Closes the pipes and waits up to `grace` for the child to exit (then SIGTERM, SIGKILL).
  // Returns its exit code; idempotent.
  int Finish(std::chrono::milliseconds grace);
  pid_t pid() const { return pid_; }

 private:
  LinkedChild(pid_t pid, int to_fd, int from_fd) : pid_(pid), to_fd_(to_fd), from_fd_(from_fd) {}

  pid_t pid_;
  int to_fd_;
  int from_fd_;
  int exit_code_ = -1;
  bool exited_ = false;  // reaped; pid_ is kept for messages only
  std::string buffered_;
};

// The one-shot form of LinkedChild: forks a child that runs `body` and writes what it returns as
// one JSON line, waits up to `limit` for that line, then for the child to exit (`grace`, then
// SIGTERM). `exit_code` is -1 when the fork failed.
struct JsonChildResult {
  Result<nlohmann::json> reply;
  int exit_code = -1;
};
JsonChildResult RunJsonChild(const std::function<nlohmann::json()>& body,
                             std::chrono::milliseconds limit,
                             std::chrono::milliseconds grace = std::chrono::seconds(10));

// LinkedChild's child side: one line out (a newline is added), one line in (nullopt at EOF or
// error).
bool WriteLine(int fd, const std::string& line);
std::optional<std::string> ReadLine(int fd, std::string& buffer);

}  // namespace kvtier::bench
