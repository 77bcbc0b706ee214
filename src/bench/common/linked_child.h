// Forked children of `bench store` that the parent drives step by step: two pipes, command lines
// down, one JSON line back per command. Lock-step control is what lets several dummy processes
// start each timed phase together, and keeps this process free of threads and ZMQ (every ZMQ
// context and client thread lives in a child).
#pragma once

#include <sys/types.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"

namespace kvtier::bench {

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

// Child side: one line out (a newline is added), one line in (nullopt at EOF or error).
bool WriteLine(int fd, const std::string& line);
std::optional<std::string> ReadLine(int fd, std::string& buffer);

}  // namespace kvtier::bench
