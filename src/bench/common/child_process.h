// Child processes for the benchmarks: forked workers and probes, and processes (`kvtier server`,
// `kvtier master`, `kvtier node`, redis-server) started on free ports with their output in a
// private log, and always stopped by PID.
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

namespace kvtier::bench {

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

class SpawnedServer {
 public:
  // Runs /proc/self/exe server on a free port with `l1_size_gb` of L1 and `chunk_size`, plus
  // `extra_args`, and waits until it says it is listening (its output goes to a private log).
  static Result<std::unique_ptr<SpawnedServer>> Start(uint32_t chunk_size, double l1_size_gb,
                                                      const std::vector<std::string>& extra_args);

  // SIGTERM and wait (SIGKILL after 10 s). Returns the exit code; idempotent.
  int Stop() { return process_->Stop(); }
  // False once the process has exited (it is reaped; Stop() then returns its exit code).
  bool Alive() { return process_->Alive(); }
  uint16_t port() const { return process_->port(); }
  pid_t pid() const { return process_->pid(); }
  std::string Log() const { return process_->Log(); }

 private:
  explicit SpawnedServer(std::unique_ptr<SpawnedProcess> p) : process_(std::move(p)) {}
  std::unique_ptr<SpawnedProcess> process_;
};

}  // namespace kvtier::bench
