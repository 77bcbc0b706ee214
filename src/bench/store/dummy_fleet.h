// The dummy-client processes of `bench store`: each is a forked child with its own dummy client
// (store::ConnectDummy) attached to one node over the node's Unix socket. It puts its values
// from, and gets them back into, buffers in its mem pool (the zero-copy path: the node copies
// straight between those memfds and the segment, or the TCP stream), and compares every byte
// after the timed part. The parent (DummyFleet) starts each phase in every process at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/common/child_process.h"
#include "bench/store/store_results.h"
#include "common/status.h"

namespace kvtier::bench {

struct DummyChildPlan {
  std::string node_address;  // the node's data-plane "host:port" (names its dummy socket)
  std::string key_prefix;    // unique per process: keys are <prefix>-t<trial>-<index>
  uint32_t values = 0;
  uint64_t value_bytes = 0;  // a multiple of 8
  uint32_t batch = 0;
  uint64_t seed = 0;
  // Puts only, every value from one buffer (no gets): writes `values` x `value_bytes` of segment
  // once, to warm it.
  bool fill_only = false;
};

// The key of value `index` in trial `trial`.
std::string DummyKey(const std::string& prefix, uint32_t trial, uint32_t index);

class DummyFleet {
 public:
  // Forks one process per plan and waits until each is connected, with its buffers registered and
  // filled. Must run while this process has no threads.
  static Result<std::unique_ptr<DummyFleet>> Start(const std::vector<DummyChildPlan>& plans);
  ~DummyFleet();

  // One phase, "put" or "get" (values zeroed first, verified after), in every process at once.
  // Samples are per process. An error means a process failed to answer; store errors are in the
  // samples. A fill_only plan can only put.
  Status RunPhase(const char* phase, uint32_t trial, std::vector<PhaseSample>& out);
  // Removes the keys of trials 0..last_trial in every process (waiting out read leases); store
  // errors go to `errors`.
  Status Remove(uint32_t last_trial, std::vector<std::string>& errors);
  // Asks every process to disconnect and exit; returns the first failure.
  Status Stop();
  std::vector<pid_t> pids() const;

 private:
  DummyFleet() = default;
  Result<std::vector<nlohmann::json>> Broadcast(const std::string& command);

  std::vector<std::unique_ptr<LinkedChild>> children_;
};

}  // namespace kvtier::bench
