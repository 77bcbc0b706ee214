// The store `bench store` runs against: `kvtier master` and two `kvtier node`s started from this
// binary on free loopback ports (each with an admin HTTP port), their output in private logs,
// stopped by PID (nodes first) when the cluster is destroyed, on error paths too. Node A
// contributes the segment (prefaulted, so no timed copy pays a first-touch fault); node P
// contributes none, so every replica a dummy on P writes or reads lies on A and every byte
// crosses the TCP data plane.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/process/launch.h"
#include "common/status.h"

namespace kvtier::bench {

class StoreCluster {
 public:
  // Waits until the master accepts connections and both nodes report themselves mounted.
  static Result<std::unique_ptr<StoreCluster>> Start(uint64_t segment_bytes,
                                                     uint64_t lease_ttl_ms);
  ~StoreCluster();

  std::string master_address() const { return master_.address(); }
  std::string node_a_address() const { return node_a_.address(); }
  std::string node_p_address() const { return node_p_.address(); }
  // The master's admin HTTP port (/metrics, /status).
  uint16_t master_http_port() const { return master_.port(1); }
  std::vector<pid_t> pids() const { return {master_.pid(), node_a_.pid(), node_p_.pid()}; }
  // Every process still running (none crashed during the run).
  bool Alive();
  // The logs of the processes that have exited, for error messages.
  std::string DeadLogs();

 private:
  StoreCluster() = default;

  process::Launched master_;
  process::Launched node_a_;
  process::Launched node_p_;
};

}  // namespace kvtier::bench
