// Deterministic data for every bench: a small seeded generator and the byte pattern a block or
// value carries. Everything is a pure function of a seed, so any process can recompute what a
// block it gets back must hold, and a block read from the wrong place cannot pass.
#pragma once

#include <cstdint>

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

// Fills one block (bytes % 8 == 0) with the pattern of (chunk_seed, region, position in chunk).
void FillBlock(uint8_t* dst, uint64_t bytes, uint64_t chunk_seed, uint32_t region, uint32_t pos);

// Fills one store or L2 value (bytes % 8 == 0): the pattern of (value_seed, region), position 0.
inline void FillValue(uint8_t* dst, uint64_t bytes, uint64_t value_seed, uint32_t region = 0) {
  FillBlock(dst, bytes, value_seed, region, 0);
}

// Offset of the first byte that differs from the pattern, or -1 when the block is right.
int64_t CheckBlock(const uint8_t* p, uint64_t bytes, uint64_t chunk_seed, uint32_t region,
                   uint32_t pos);
// Offset of the first non-zero byte, or -1.
int64_t CheckZero(const uint8_t* p, uint64_t bytes);

// The 8 bytes FillBlock writes at word `word` (for error messages).
uint64_t PatternWord(uint64_t chunk_seed, uint32_t region, uint32_t pos, uint64_t word);

}  // namespace kvtier::bench
