// Child processes for the benchmarks: forked workers and probes, and a `kvtier server` started
// from this same binary on free ports and always stopped by PID.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::cli {

// Whether a TCP connection to host:port succeeds now (a plain socket, so it is safe before
// fork(); a ZMQ client would instead wait for its whole timeout on a wrong address).
Status CheckTcpReachable(const std::string& host, uint16_t port);

// Forks; the child runs `fn` and _exit()s with its result (it never returns to the caller's
// stack). The child gets SIGTERM if the parent dies, so nothing outlives a crashed bench.
Result<pid_t> ForkChild(const std::function<int()>& fn);

// The child's exit code once it has exited (128 + signal when killed), nullopt while it runs.
std::optional<int> TryReap(pid_t pid);

// Waits up to `grace` for the child to exit, then SIGTERM, then SIGKILL; returns the exit code.
int StopChild(pid_t pid, std::chrono::milliseconds grace);

class SpawnedServer {
 public:
  // Runs /proc/self/exe server on a free port with `l1_size_gb` of L1 and `chunk_size`, plus
  // `extra_args`, and waits until it says it is listening (its output goes to a private log).
  static Result<std::unique_ptr<SpawnedServer>> Start(uint32_t chunk_size, double l1_size_gb,
                                                      const std::vector<std::string>& extra_args);
  ~SpawnedServer();
  SpawnedServer(const SpawnedServer&) = delete;
  SpawnedServer& operator=(const SpawnedServer&) = delete;

  // SIGTERM and wait (SIGKILL after 10 s). Returns the exit code; idempotent.
  int Stop();
  // False once the process has exited (it is reaped; Stop() then returns its exit code).
  bool Alive();
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  std::string Log() const;

 private:
  SpawnedServer(pid_t pid, uint16_t port, int log_fd) : pid_(pid), port_(port), log_fd_(log_fd) {}

  pid_t pid_;
  uint16_t port_;
  int log_fd_;
  int exit_code_ = -1;
};

}  // namespace kvtier::cli
