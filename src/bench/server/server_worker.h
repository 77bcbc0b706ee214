// One `bench server` worker process: the engine side of the data path. It registers a paged KV
// buffer once, then for every generated prompt fills its blocks, STOREs them, PINGs, LOOKUPs and
// waits for the prefetch, zeroes the blocks, RETRIEVEs them, checks every byte and ends the
// session. A trace request goes the engine's way instead: LOOKUP, RETRIEVE (checked), fill the
// rest, STORE. Timings and progress go into SharedResults.
#pragma once

#include <cstdint>
#include <string>

#include <vector>

#include "bench/server/server_bench.h"
#include "bench/server/trace_prompts.h"
#include "bench/server/worker_results_shm.h"

namespace kvtier::bench {

// PING is the server's cheapest request: its RTT separates framing/dispatch cost from LOOKUP's.
struct WorkerPlan {
  BenchServerOptions options;
  std::string host;
  uint16_t port = 0;
  std::string model;  // unique per run, so an existing server holds none of our keys yet
  uint64_t instance_base = 0;
  // With --trace: the requests to replay (worker w takes w, w + workers, ...) and their shape.
  const std::vector<TraceRequest>* trace = nullptr;
  TraceShape trace_shape;
};

// Body of worker process `index`; returns its exit code (non-zero on any error or mismatch).
int RunWorker(const WorkerPlan& plan, uint32_t index, SharedResults& out);

}  // namespace kvtier::bench
