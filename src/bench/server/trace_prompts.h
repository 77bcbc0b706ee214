// How `bench server --trace` turns Mooncake trace requests into prompts. Each hash id becomes
// `tokens_per_id` tokens derived from the id, so requests whose ids agree up to a block agree on
// every token up to it, and the server's prefix keys match exactly where the trace says blocks are
// shared. A chunk's byte pattern is seeded by the ids its tokens come from: whichever request
// stores a chunk first provides the bytes every later one must retrieve.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/server/trace_file.h"

namespace kvtier::bench {

struct TraceShape {
  uint32_t tokens_per_id = 0;  // replay tokens behind one hash id (the trace has 512)
  uint32_t chunk_size = 0;
  uint64_t seed = 0;
};

struct TracePrompt {
  std::vector<uint32_t> tokens;       // whole chunks only; the partial tail is dropped
  std::vector<uint64_t> chunk_seeds;  // one per chunk
};

// Whole chunks of the request once scaled to `tokens_per_id` tokens per 512.
uint32_t TraceChunks(const TraceRequest& r, const TraceShape& shape);

TracePrompt MakeTracePrompt(const TraceRequest& r, const TraceShape& shape);

// What an unbounded cache would see when the requests arrive one after another in trace order.
struct IdealTraceCache {
  uint64_t hits = 0;             // leading chunks found: the ceiling for the replay's lookup hits
  uint64_t distinct_chunks = 0;  // what it would hold at the end
  std::vector<uint32_t> leading;  // per request: its leading chunks found
};
IdealTraceCache SimulateIdealCache(const std::vector<TraceRequest>& requests,
                                   const TraceShape& shape);

}  // namespace kvtier::bench
