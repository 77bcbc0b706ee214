// The generated prompts of `bench server`: tokens with shared prefixes, and the seed of each
// chunk's byte pattern (data_pattern.h). Pure functions of the seed and the prompt's identity,
// so every worker process can recompute what a retrieved block must hold.
#pragma once

#include <cstdint>
#include <vector>

namespace kvtier::bench {

inline constexpr uint32_t kVocab = 128'000;  // token ids are below this

struct PromptShape {
  uint32_t prompt_tokens = 0;
  uint32_t chunk_size = 0;
  uint32_t shared_prefixes = 0;
  uint32_t shared_prefix_tokens = 0;
};

struct Prompt {
  static constexpr uint32_t kNoGroup = UINT32_MAX;
  std::vector<uint32_t> tokens;
  uint32_t group = kNoGroup;
  uint32_t shared_chunks = 0;  // leading chunks identical to every prompt of the group
};

// Prompt `prompt` of worker `worker`. Prompts of one group (across all workers) share their
// first shared_chunks chunks; the rest is unique, so every prompt has chunks of its own to store.
Prompt MakePrompt(const PromptShape& shape, uint64_t seed, uint32_t worker, uint32_t prompt);

// Seed of the pattern of one chunk. Shared chunks are keyed by (group, chunk) because whichever
// prompt stores them first provides the bytes every other prompt of the group retrieves.
uint64_t ChunkSeed(uint64_t seed, const Prompt& p, uint32_t worker, uint32_t prompt,
                   uint32_t chunk);

}  // namespace kvtier::bench
