// The `--trace` part of `bench server`'s summary: what was replayed, the hits per tier against an
// unbounded cache's, the bytes moved, and estimated TTFT with kvtier against recomputing every
// prompt (ttft_model.h), overall and over trace time (the rows `--plot` draws).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "bench/server/ttft_model.h"
#include "bench/server/worker_results_shm.h"

namespace kvtier::bench {

// What `--trace` replayed, and the hits an unbounded cache would have had.
struct TraceSummary {
  std::string file;
  uint64_t requests = 0;   // replayed
  uint64_t too_short = 0;  // left out: shorter than one chunk once scaled
  uint32_t tokens_per_id = 0;
  uint32_t chunk_size = 0;
  double speedup = 0;
  uint64_t chunks = 0;      // in the replayed requests
  uint64_t ideal_hits = 0;  // SimulateIdealCache
  uint64_t distinct_chunks = 0;
  struct Request {
    uint64_t timestamp_ms = 0;
    uint64_t input_tokens = 0;
    uint32_t ideal_hits = 0;  // leading chunks an unbounded cache had
  };
  std::vector<Request> replayed;  // in trace order
  PrefillModel model;
};

struct TraceInputs {
  const TraceSummary& trace;
  const std::vector<PromptSample>& samples;
  uint64_t object_bytes = 0;
  // The server's STATS once the workload ended (per-tier lookup hits); empty when unknown.
  const std::vector<std::pair<std::string, double>>& server_stats;
  bool spawned_server = false;  // its counters then hold this replay only
};

// The "trace" object of the summary. `bins` rows over trace time go in "timeline".
nlohmann::json TraceJson(const TraceInputs& in, size_t bins);

void PrintTraceReport(const nlohmann::json& trace, std::ostream& os);

}  // namespace kvtier::bench
