// A node's share of re-replication: a thread that asks the master for under-replicated objects
// to copy into this node's segment (MasterApi::TakeRepairs, up to bytes_per_s * interval per
// round), reads each from a surviving replica over the data plane straight into the target
// space, and reports which copies are whole (EndRepairs), so the master publishes only those.
// An idle round waits `interval` before the next; a busy one waits until its bytes fit the rate
// (at once when the copy itself took longer). A target outside the segment this node serves now
// is never written.
// Thread-safety: Start/Stop from the owner's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/metrics.h"
#include "store/protocol/master_api.h"
#include "store/transport/segment_gate.h"
#include "store/transport/transfer_engine.h"

namespace kvtier::store {

struct RepairerOptions {
  uint64_t bytes_per_s = 256ull << 20;  // 0: this node copies nothing
  std::chrono::milliseconds interval{200};
};

// What the repairer works on: the node's own, outliving it.
struct RepairerTarget {
  MasterApi* master = nullptr;
  TransferEngine* engine = nullptr;
  std::string node_id;
  std::string endpoint;  // this node's data plane: targets must be here
  uint8_t* segment = nullptr;
  uint64_t segment_size = 0;
  std::shared_ptr<SegmentGate> gate;  // the segment id served now
  std::function<bool()> mounted;      // asks only while the master knows this node
};

class Repairer {
 public:
  Repairer(RepairerTarget target, RepairerOptions options, MetricsRegistry& metrics);
  ~Repairer();  // Stop()
  void Start();
  void Stop();
  // One round now (the thread runs these); returns the bytes of the copies reported whole.
  uint64_t RunOnce();

 private:
  void Loop();

  const RepairerTarget t_;
  const RepairerOptions options_;
  Counter* copied_;
  Counter* failed_;
  Counter* bytes_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvtier::store
