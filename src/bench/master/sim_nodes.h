// Simulated store nodes for `kvtier bench master --nodes`: each speaks a node's control plane to
// the master (its own MasterClient, so its own connection, as a real node has): it mounts one
// segment of the size it claims (it holds no memory), pings at the node's heartbeat interval
// (remounting when told need_remount, as StoreNode does) and, when repair polling is on, asks
// for re-replication work at the node's repair interval. Work it is given it cannot do (it has no
// bytes to copy): every task is answered EndRepairs(copied = false) and counted as refused.
// A few threads drive all nodes, each node at its own phase of the interval.
// Thread-safety: the control calls (Set*, Silence, counters) may come from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "store/protocol/master_api.h"

namespace kvtier::bench {

struct SimFleetOptions {
  std::string master;  // "host:port"
  uint32_t nodes = 10;
  uint64_t segment_bytes = 1ull << 30;  // claimed by each node
  std::chrono::milliseconds ping_interval{1000};
  std::chrono::milliseconds repair_interval{200};
  uint64_t repair_bytes_per_round = (256ull << 20) / 5;  // the node's default rate x interval
  uint32_t threads = 4;
};

struct SimFleetCounts {
  uint64_t pings_ok = 0;
  uint64_t pings_failed = 0;
  uint64_t remounts = 0;
  uint64_t repair_polls = 0;
  uint64_t repair_tasks_refused = 0;  // handed to a simulated node, answered copied = false
};

class SimFleet {
 public:
  explicit SimFleet(SimFleetOptions options);
  ~SimFleet();  // Stop()
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;

  // Mounts every node's segment (one call each, in order) and starts the driving threads with
  // pings and repair polls off; the first error stops it.
  Status Start();
  void Stop();

  void SetPinging(bool on) { pinging_ = on; }
  void SetRepairPolling(bool on) { polling_ = on; }
  // Node `i` falls silent for good (no pings, no polls), as a killed node does.
  void Silence(uint32_t i);

  const std::string& node_id(uint32_t i) const { return nodes_[i]->info.id; }
  uint32_t size() const { return static_cast<uint32_t>(nodes_.size()); }
  SimFleetCounts Counts() const;

 private:
  struct Node {
    store::NodeInfo info;
    store::SegmentInfo segment;
    std::unique_ptr<store::MasterApi> master;
    std::atomic<bool> silent{false};
  };
  void Drive(uint32_t thread);
  void Beat(Node& node);
  void PollRepairs(Node& node);

  const SimFleetOptions options_;
  std::vector<std::unique_ptr<Node>> nodes_;
  uint32_t thread_count_ = 1;  // set before the threads start
  std::vector<std::thread> threads_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> pinging_{false};
  std::atomic<bool> polling_{false};
  std::atomic<uint64_t> pings_ok_{0}, pings_failed_{0}, remounts_{0}, polls_{0}, refused_{0};
};

}  // namespace kvtier::bench
