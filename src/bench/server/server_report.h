// Statistics and output of `bench server`: one JSON summary holds every number; the table is
// printed from it, so the two never disagree.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/common/limits.h"
#include "bench/server/server_bench.h"
#include "bench/server/server_rtt.h"
#include "bench/server/trace_report.h"
#include "bench/server/worker_results_shm.h"

namespace kvtier::bench {

// The project's goals, next to the numbers they judge.
// STORE+RETRIEVE GB/s >= 90% of memcpy with 2 workers (issue 19; 50% before it).
inline constexpr double kCopyGoalFraction = 0.90;
inline constexpr double kLookupGoalRatio = 1.5;    // LOOKUP p50 <= 1.5x raw ZMQ RTT p50

struct BenchRun {
  BenchServerOptions options;
  std::string endpoint;  // host:port of the server used
  bool spawned_server = false;
  uint64_t object_bytes = 0;
  uint64_t buffer_bytes = 0;  // per worker
  MachineLimits limits;
  std::optional<ServerRtt> server_rtt;  // tight-loop probe after the workload
  std::vector<PromptSample> samples;    // every measured prompt of every worker
  double wall_s = 0;                    // first measured prompt start to last end, all workers
  std::vector<double> register_s;       // per worker
  std::optional<TraceSummary> trace;
  std::vector<std::pair<std::string, double>> server_stats;  // STATS once the workload ended
  std::vector<std::string> errors;
};

nlohmann::json Summarize(const BenchRun& run);

// The human report: configuration, limits, the per-op table and the ratios against the goals.
void PrintReport(const nlohmann::json& summary, std::ostream& os);

}  // namespace kvtier::bench
