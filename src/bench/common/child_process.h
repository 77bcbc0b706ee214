// The benches' child processes, on the process library (common/process/): programs run to
// completion with their output captured (redis-benchmark, gnuplot), and forked children driven
// step by step over two pipes (LinkedChild). Servers, masters and nodes start through the typed
// launchers of common/process/kvtier_launchers.h; forked workers and probes are
// process::Child::Fork. Every child dies with the bench and is stopped by PID.
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
