// The server's L2 adapters in cascade order (the order of --l2-adapter flags), each wrapped in
// its L2Capacity (what the server holds there, evicted to stay under max_bytes), the router that
// delivers their completions, their per-adapter metrics, and their health: an adapter whose
// operations fail is marked down and skipped (a miss for lookups, a skipped copy for stores)
// until a retry time that backs off from 100 ms to 5 s; the first operation after that time is
// the probe, and its success marks the adapter up again. A write (store, delete) that fails
// without the backend being out of reach (not UNAVAILABLE or TIMEOUT: a full disk, a backend out
// of memory) only stops writes the same way, until a store succeeds: what the backend holds is
// still read. Transitions are logged once each, so a burst of failures makes one warning, not
// thousands. Retry times are on the injected clock, so tests reach them by advancing a FakeClock.
// Thread-safety: after Create, Submit, Available, Up and Status may be called from any thread
// (health is atomics); Close from the owner.
#pragma once

#include <array>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "connectors/completion_router.h"
#include "connectors/connector.h"
#include "connectors/connector_registry.h"
#include "server/l2_capacity.h"

namespace kvtier {

class L2Cascade {
 public:
  // Parses and creates every adapter through `registry` (the caller picks which connector types
  // exist); the first bad one is the error (its message names it). `env` is the memory adapters
  // may register with their backends (the L1 arena); `clock` times the health back-off.
  static Result<std::unique_ptr<L2Cascade>> Create(const std::vector<std::string>& adapter_json,
                                                   const ConnectorRegistry& registry,
                                                   MetricsRegistry& metrics,
                                                   const ConnectorEnv& env = {},
                                                   Clock& clock = *Clock::Real());
  ~L2Cascade();  // Close()

  size_t size() const { return adapters_.size(); }
  L2Capacity& adapter(size_t i) { return *adapters_[i]; }
  const std::string& name(size_t i) const { return adapters_[i]->Options().name; }

  // Submits through the router; the completion updates metrics and health before `done` runs
  // (on the router thread: keep `done` short).
  void Submit(size_t i, ConnectorOp op, const CompletionRouter::SubmitFn& submit,
              CompletionRouter::Callback done);
  std::future<Completion> Submit(size_t i, ConnectorOp op,
                                 const CompletionRouter::SubmitFn& submit);

  // The adapter's LookupNow (connector.h: on this thread, or nullopt), recorded like a completion.
  std::optional<Completion> LookupNow(size_t i, std::vector<std::string> keys);

  // False while the adapter is down (for `op`: writes may be down alone) and its retry time has
  // not come.
  bool Available(size_t i, ConnectorOp op) const;
  // Up for reads and writes.
  bool Up(size_t i) const;

  // Removes every object the server accounts for in every adapter that is up (only the keys
  // that start with `key_prefix`, when given), except those a lookup holds locked; blocks until
  // the removes complete. Returns the objects removed.
  uint64_t Clear(std::string_view key_prefix = {});

  // Closes every adapter (queued tasks complete as failed, so every callback runs), then stops
  // the router. Idempotent.
  void Close();

  nlohmann::json Status() const;

 private:
  struct OpMetrics {
    Counter* tasks;
    Counter* failed;
    Counter* keys;
    Counter* hits;
    Counter* bytes;
    Histogram* latency;
  };
  struct Health {
    std::atomic<bool> up{true};
    std::atomic<uint32_t> failures{0};  // consecutive
    std::atomic<int64_t> retry_at_ns{0};
    bool Available(int64_t now_ns) const;
    bool MarkUp();                    // true if it was down
    bool MarkDown(int64_t now_ns);    // true if it was up
  };
  struct AdapterHealth {
    Health all;     // the backend answers
    Health writes;  // and takes writes
  };

  L2Cascade(std::vector<std::unique_ptr<L2Capacity>> adapters, MetricsRegistry& metrics,
            Clock& clock);
  void Record(size_t i, const Completion& c);

  Clock& clock_;
  std::vector<std::unique_ptr<L2Capacity>> adapters_;
  std::vector<std::array<OpMetrics, kConnectorOps>> metrics_;
  std::vector<Gauge*> inflight_;
  std::vector<Gauge*> up_;
  std::vector<std::unique_ptr<AdapterHealth>> health_;
  // Completions are recorded on the router thread and on submitting threads (a task that
  // completed inside its submission): one at a time, so that up/down and its gauge agree.
  std::mutex health_mu_;
  std::unique_ptr<CompletionRouter> router_;
  std::once_flag closed_;
};

}  // namespace kvtier
