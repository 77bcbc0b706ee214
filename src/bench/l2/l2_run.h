// The workload of `bench l2` against one connector: keys and values, phase 1 (store bursts with
// lookup/load probes), phase 2 (store all, load all, verify) and the removal of what it stored.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/l2/l2_bench.h"
#include "common/memfd.h"
#include "connectors/connector.h"
#include "connectors/connector_registry.h"

namespace kvtier::bench {

// Keys and values shared by every adapter config of one run: value i is a pure function of
// (seed, i), so a loaded value can be checked without keeping a copy.
class L2Workload {
 public:
  static Result<L2Workload> Create(const BenchL2Options& o, uint64_t value_size);

  // Phase 1 and phase 2 use different key sets, so phase 2 stores are real first writes.
  std::string Key(uint32_t phase, uint32_t index) const;
  const uint8_t* Value(uint32_t index) const { return values_.data() + Offset(index); }
  // Destination of the load of `index` in phase 2 (one per key, written once per config).
  uint8_t* LoadSlot(uint32_t index) const { return loads_.data() + Offset(index); }
  void ClearLoadSlots() const;
  // The value and load buffers, for adapters that register memory with their backend (as the
  // server's L1 arena is).
  ConnectorEnv SharedMemory() const {
    return {{{values_.data(), values_.size(), values_.fd()},
             {loads_.data(), loads_.size(), loads_.fd()}}};
  }
  // Offset of the first wrong byte of `data` as value `index`, or -1.
  int64_t Check(const uint8_t* data, uint32_t index) const;

  uint32_t keys() const { return keys_; }
  uint64_t value_size() const { return value_size_; }

 private:
  size_t Offset(uint32_t index) const { return size_t{index} * value_size_; }
  uint64_t ValueSeed(uint32_t index) const;

  std::string model_;
  uint64_t seed_ = 0;
  uint32_t keys_ = 0;
  uint64_t value_size_ = 0;
  MappedFile values_;
  MappedFile loads_;
};

// Latencies of one operation kind: caller-side (submit to the completion reaching this thread,
// through the CompletionRouter) and connector-side (Completion::latency).
struct L2OpSamples {
  std::vector<double> seconds;
  std::vector<double> connector_seconds;
  uint64_t keys = 0;
  uint64_t bytes = 0;
};

// Phase 2, one direction: every key, `inflight` single-key tasks at a time.
struct L2Pass {
  L2OpSamples ops;
  double wall_s = 0;  // first submission to last completion
};

struct L2AdapterRun {
  std::string adapter_json;
  std::string label;  // "shared 4 threads" or "per-op lookup 1, retrieve 1, store 2, ..."
  uint32_t rounds = 0;
  L2OpSamples lookup, load, store;    // phase 1
  uint64_t probes = 0;                // lookup+load probe pairs in phase 1
  uint64_t probes_during_stores = 0;  // ... submitted while a store of the round was in flight
  L2Pass store_all, load_all;         // phase 2
  L2OpSamples remove;                 // cleanup of both phases
  uint64_t verified_bytes = 0;
  std::vector<std::string> errors;
};

using L2ProgressFn = std::function<void(const std::string&)>;

// Runs both phases and removes every key it stored (also after a failure, best effort).
void RunL2Adapter(Connector& connector, const L2Workload& w, const BenchL2Options& o,
                  uint32_t rounds, const L2ProgressFn& progress, L2AdapterRun& out);

}  // namespace kvtier::bench
