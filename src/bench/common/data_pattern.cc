// The seeded generator and the block byte pattern (data_pattern.h).
#include "bench/common/data_pattern.h"

#include <cstring>

namespace kvtier::bench {

namespace {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

uint64_t Finalize(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t BlockBase(uint64_t chunk_seed, uint32_t region, uint32_t pos) {
  return Mix(Mix(chunk_seed, region), pos);
}

}  // namespace

uint64_t SplitMix::Next() {
  s_ += kGolden;
  return Finalize(s_);
}

uint64_t Mix(uint64_t a, uint64_t b) { return Finalize(a * kGolden + Finalize(b + 1)); }

uint64_t PatternWord(uint64_t chunk_seed, uint32_t region, uint32_t pos, uint64_t word) {
  return BlockBase(chunk_seed, region, pos) + word * kGolden;
}

void FillBlock(uint8_t* dst, uint64_t bytes, uint64_t chunk_seed, uint32_t region, uint32_t pos) {
  const uint64_t base = BlockBase(chunk_seed, region, pos);
  const uint64_t words = bytes / 8;
  uint64_t v = base;
  for (uint64_t w = 0; w < words; ++w, v += kGolden) std::memcpy(dst + w * 8, &v, 8);
}

int64_t CheckBlock(const uint8_t* p, uint64_t bytes, uint64_t chunk_seed, uint32_t region,
                   uint32_t pos) {
  const uint64_t base = BlockBase(chunk_seed, region, pos);
  const uint64_t words = bytes / 8;
  // Branch-free accumulation keeps the common (correct) case vectorised; locate on failure.
  uint64_t diff = 0;
  uint64_t v = base;
  for (uint64_t w = 0; w < words; ++w, v += kGolden) {
    uint64_t got;
    std::memcpy(&got, p + w * 8, 8);
    diff |= got ^ v;
  }
  if (diff == 0) return -1;
  v = base;
  for (uint64_t w = 0; w < words; ++w, v += kGolden) {
    uint64_t got;
    std::memcpy(&got, p + w * 8, 8);
    if (got == v) continue;
    for (int b = 0; b < 8; ++b) {
      if (((got ^ v) >> (8 * b)) & 0xFF) return static_cast<int64_t>(w * 8 + b);
    }
  }
  return -1;
}

int64_t CheckZero(const uint8_t* p, uint64_t bytes) {
  uint8_t any = 0;
  for (uint64_t i = 0; i < bytes; ++i) any |= p[i];
  if (any == 0) return -1;
  for (uint64_t i = 0; i < bytes; ++i) {
    if (p[i] != 0) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace kvtier::bench
