// The untimed check after a bench's reads (value_check.h).
#include "bench/common/value_check.h"

#include <cstring>

namespace kvtier::bench {

uint64_t CompareValues(const uint8_t* got, const uint8_t* want, uint32_t values,
                       uint64_t value_bytes, const std::function<void(uint32_t)>& on_different) {
  uint64_t matched = 0;
  for (uint32_t i = 0; i < values; ++i) {
    const uint64_t off = uint64_t{i} * value_bytes;
    if (std::memcmp(got + off, want + off, value_bytes) == 0) {
      matched += value_bytes;
    } else {
      on_different(i);
    }
  }
  return matched;
}

}  // namespace kvtier::bench
