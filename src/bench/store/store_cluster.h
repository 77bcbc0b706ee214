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

#include "bench/common/child_process.h"
#include "common/status.h"

namespace kvtier::bench {

class StoreCluster {
 public:
  // Waits until the master accepts connections and both nodes report themselves mounted.
  static Result<std::unique_ptr<StoreCluster>> Start(uint64_t segment_bytes,
                                                     uint64_t lease_ttl_ms);
  ~StoreCluster();

  std::string master_address() const { return Address(*master_); }
  std::string node_a_address() const { return Address(*node_a_); }
  std::string node_p_address() const { return Address(*node_p_); }
  // The master's admin HTTP port (/metrics, /status).
  uint16_t master_http_port() const { return *master_http_port_; }
  std::vector<pid_t> pids() const { return {master_->pid(), node_a_->pid(), node_p_->pid()}; }
  // Every process still running (none crashed during the run).
  bool Alive();
  // The logs of the processes that have exited, for error messages.
  std::string DeadLogs();

 private:
  StoreCluster() = default;
  static std::string Address(const SpawnedProcess& p) {
    return "127.0.0.1:" + std::to_string(p.port());
  }

  std::shared_ptr<uint16_t> master_http_port_ = std::make_shared<uint16_t>(0);
  std::unique_ptr<SpawnedProcess> master_;
  std::unique_ptr<SpawnedProcess> node_a_;
  std::unique_ptr<SpawnedProcess> node_p_;
};

}  // namespace kvtier::bench
