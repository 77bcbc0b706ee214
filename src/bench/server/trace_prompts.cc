// Trace requests as prompts, and the ideal-cache pass (trace_prompts.h).
#include "bench/server/trace_prompts.h"

#include <unordered_set>

#include "bench/common/data_pattern.h"
#include "bench/server/prompts.h"

namespace kvtier::bench {

namespace {

constexpr uint64_t kTraceTag = 0x7124CE0000ULL;  // keeps trace seeds apart from generated ones

// The seed of each chunk: the ids up to the one holding the chunk's last token, and its index.
std::vector<uint64_t> ChunkSeeds(const TraceRequest& r, const TraceShape& shape) {
  const uint32_t chunks = TraceChunks(r, shape);
  std::vector<uint64_t> seeds(chunks);
  uint64_t prefix = Mix(shape.seed, kTraceTag);
  size_t ids_in_prefix = 0;
  for (uint32_t c = 0; c < chunks; ++c) {
    const uint64_t last_token = (uint64_t{c} + 1) * shape.chunk_size - 1;
    for (const size_t need = last_token / shape.tokens_per_id + 1; ids_in_prefix < need;) {
      prefix = Mix(prefix, r.hash_ids[ids_in_prefix++]);
    }
    seeds[c] = Mix(prefix, c);
  }
  return seeds;
}

}  // namespace

uint32_t TraceChunks(const TraceRequest& r, const TraceShape& shape) {
  const uint64_t tokens = r.input_length * shape.tokens_per_id / kTraceBlockTokens;
  return static_cast<uint32_t>(tokens / shape.chunk_size);
}

TracePrompt MakeTracePrompt(const TraceRequest& r, const TraceShape& shape) {
  TracePrompt p;
  p.chunk_seeds = ChunkSeeds(r, shape);
  p.tokens.resize(size_t{shape.chunk_size} * p.chunk_seeds.size());
  for (size_t i = 0; i < p.tokens.size(); ++i) {
    const uint64_t id = r.hash_ids[i / shape.tokens_per_id];
    p.tokens[i] = static_cast<uint32_t>(Mix(Mix(shape.seed, id), i % shape.tokens_per_id) % kVocab);
  }
  return p;
}

IdealTraceCache SimulateIdealCache(const std::vector<TraceRequest>& requests,
                                   const TraceShape& shape) {
  std::unordered_set<uint64_t> cached;
  IdealTraceCache ideal;
  for (const TraceRequest& r : requests) {
    const std::vector<uint64_t> seeds = ChunkSeeds(r, shape);
    size_t leading = 0;
    while (leading < seeds.size() && cached.count(seeds[leading]) > 0) ++leading;
    ideal.hits += leading;
    ideal.leading.push_back(static_cast<uint32_t>(leading));
    cached.insert(seeds.begin(), seeds.end());
  }
  ideal.distinct_chunks = cached.size();
  return ideal;
}

}  // namespace kvtier::bench
