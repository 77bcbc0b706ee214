// How `bench l2` talks to a connector: every submission goes through a CompletionRouter, as in
// the server; the router's callbacks only stamp the time and queue the completion for the bench
// thread, which does all the bookkeeping and checking.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include "bench/common/timing.h"
#include "connectors/completion_router.h"

namespace kvtier::bench {

// A completion later than the connector's deadline plus this means the connector is stuck.
inline constexpr auto kL2StuckGrace = std::chrono::seconds(30);

struct L2Event {
  uint32_t index = 0;  // key index (or batch number for removals)
  BenchClock::time_point submitted, done;
  Completion c;
};

class L2Driver {
 public:
  explicit L2Driver(Connector& c) : conn_(c), router_({&c}) {}
  ~L2Driver() { Shutdown(); }
  L2Driver(const L2Driver&) = delete;
  L2Driver& operator=(const L2Driver&) = delete;

  void Submit(ConnectorOp op, uint32_t index, const CompletionRouter::SubmitFn& fn);
  // The next completion; nullopt when none came within the deadline plus kL2StuckGrace.
  std::optional<L2Event> Next();
  // Submitted and not yet returned by Next(). Bench thread only.
  size_t outstanding() const { return outstanding_; }
  // Closes the connector (tasks still queued complete as UNAVAILABLE) and stops the router, so
  // no buffer is touched afterwards. Idempotent.
  void Shutdown();

 private:
  Connector& conn_;
  CompletionRouter router_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<L2Event> q_;
  size_t outstanding_ = 0;
};

}  // namespace kvtier::bench
