// The benches' child processes, on the process library (common/process/): programs run to
// completion with their output captured (redis-benchmark, gnuplot); processes exec'd on a free
// port with their output in a private log (SpawnedProcess); and forked children driven step by
// step over two pipes (LinkedChild). Forked workers and probes are process::Child::Fork. Every
// child dies with the bench and is stopped by PID.
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

#include "common/process/child.h"
#include "common/status.h"

namespace kvtier::bench {

// Runs args[0] (argv = args) with stdout and stderr captured until it exits, at most `limit`
// (then it is stopped); returns (exit code, output).
Result<std::pair<int, std::string>> RunCapture(const std::vector<std::string>& args,
                                               std::chrono::milliseconds limit);

// Whole-buffer I/O on a pipe to or from a child (EINTR and short transfers retried); false on an
// error or end of file.
bool WriteAll(int fd, const void* data, size_t n);
bool ReadAll(int fd, void* data, size_t n);

// A process exec'd on a free loopback port, its stdout and stderr in a private log.
class SpawnedProcess {
 public:
  struct Spec {
    std::string name;    // for messages, e.g. "kvtier master"
    std::string binary;  // what to exec, e.g. /proc/self/exe
    // argv (argv[0] included) for the free port chosen.
    std::function<std::vector<std::string>(uint16_t port)> args;
    // Polled until it holds (the process is ready) or `timeout` passes.
    std::function<bool(const SpawnedProcess&)> ready;
    std::chrono::seconds timeout{120};
  };

  // A free port can be taken between the probe and the bind, so a process that exits before it
  // is ready is tried again on another port (3 attempts).
  static Result<std::unique_ptr<SpawnedProcess>> Start(const Spec& spec);
  SpawnedProcess(const SpawnedProcess&) = delete;
  SpawnedProcess& operator=(const SpawnedProcess&) = delete;

  // SIGTERM and wait (SIGKILL after 10 s). Returns the exit code; idempotent.
  int Stop() { return child_.Stop(std::chrono::seconds(10)); }
  // False once the process has exited (it is reaped; Stop() then returns its exit code).
  bool Alive() { return child_.Alive(); }
  uint16_t port() const { return port_; }
  pid_t pid() const { return child_.pid(); }
  std::string Log() const { return child_.Log(); }

 private:
  SpawnedProcess(process::Child child, uint16_t port) : child_(std::move(child)), port_(port) {}

  process::Child child_;  // stopped when destroyed
  uint16_t port_;
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
  LinkedChild(process::Child child, int to_fd, int from_fd)
      : pid_(child.pid()), child_(std::move(child)), to_fd_(to_fd), from_fd_(from_fd) {}

  pid_t pid_;  // kept for messages once the child is reaped
  process::Child child_;
  int to_fd_;
  int from_fd_;
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
