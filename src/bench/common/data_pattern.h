// Deterministic workload data for `bench server`: prompt tokens (with shared prefixes) and the
// byte pattern every block of a chunk carries. Everything is a pure function of the seed and the
// chunk's identity, so any process can recompute what a retrieved block must hold.
#pragma once

#include <cstdint>
#include <vector>

namespace kvtier::bench {

// splitmix64: tiny, fast, and good enough for tokens and block choice.
class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : s_(seed) {}
  uint64_t Next();
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t s_;
};

// Order-dependent combination of two values into a well-mixed 64-bit value.
uint64_t Mix(uint64_t a, uint64_t b);

inline constexpr uint32_t kVocab = 128'000;  // token ids are below this

struct PromptShape {
  uint32_t prompt_tokens = 0;
  uint32_t chunk_size = 0;
  uint32_t prefix_groups = 0;
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

// Fills one block (bytes % 8 == 0) with the pattern of (chunk_seed, region, position in chunk).
void FillBlock(uint8_t* dst, uint64_t bytes, uint64_t chunk_seed, uint32_t region, uint32_t pos);

// Offset of the first byte that differs from the pattern, or -1 when the block is right.
int64_t CheckBlock(const uint8_t* p, uint64_t bytes, uint64_t chunk_seed, uint32_t region,
                   uint32_t pos);
// Offset of the first non-zero byte, or -1.
int64_t CheckZero(const uint8_t* p, uint64_t bytes);

// The 8 bytes FillBlock writes at word `word` (for error messages).
uint64_t PatternWord(uint64_t chunk_seed, uint32_t region, uint32_t pos, uint64_t word);

}  // namespace kvtier::bench
