// The cache server `bench server` runs against when no --server is given: `kvtier server` from
// this binary on a free loopback port (process::LaunchServer), its output in a private log,
// stopped by PID.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/process/launch.h"
#include "common/status.h"

namespace kvtier::bench {

class SpawnedServer {
 public:
  // Runs /proc/self/exe server on a free port with `l1_size_gb` of L1 and `chunk_size`, plus
  // `extra_args`, and waits until it says it is listening (its output goes to a private log).
  // Its admin HTTP listener is off unless `with_http` (then on a free port: http_port()).
  static Result<std::unique_ptr<SpawnedServer>> Start(uint32_t chunk_size, double l1_size_gb,
                                                      const std::vector<std::string>& extra_args,
                                                      bool with_http = false);

  // SIGTERM and wait (SIGKILL after 10 s). Returns the exit code; idempotent.
  int Stop() { return process_.Stop(std::chrono::seconds(10)); }
  // False once the process has exited (it is reaped; Stop() then returns its exit code).
  bool Alive() { return process_.Alive(); }
  uint16_t port() const { return process_.port(0); }
  uint16_t http_port() const { return process_.port(1); }  // 0: off
  pid_t pid() const { return process_.pid(); }
  std::string Log() const { return process_.Log(); }

 private:
  explicit SpawnedServer(process::Launched p) : process_(std::move(p)) {}
  process::Launched process_;
};

}  // namespace kvtier::bench
