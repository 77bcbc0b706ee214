// The run of `bench l2` against one connector: phase 1 (store bursts with lookup/load probes,
// then as many probes with no store in flight, the baseline of the isolation ratio), phase 2 (store all, load all, verify) and the removal of what it stored, with what each
// measured.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/l2/l2_bench.h"
#include "bench/l2/l2_workload.h"
#include "connectors/connector.h"

namespace kvtier::bench {

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
  std::string label;  // "shared 4 threads" or "per-op lookup 1, load 1, write 2, ..."
  uint32_t rounds = 0;
  L2OpSamples lookup, load, store;    // phase 1
  uint64_t probes = 0;                // lookup+load probe pairs in phase 1
  uint64_t probes_during_stores = 0;  // ... submitted while a store of the round was in flight
  L2OpSamples quiet_lookup, quiet_load;  // the same probes after phase 1, no store in flight
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
