// The untimed check after a bench's reads: every value byte by byte against what was written.
#pragma once

#include <cstdint>
#include <functional>

namespace kvtier::bench {

// Compares `values` consecutive values of `value_bytes` each at `got` with those at `want`;
// calls `on_different(i)` for each value i that differs. Returns the bytes of the values that
// matched.
uint64_t CompareValues(const uint8_t* got, const uint8_t* want, uint32_t values,
                       uint64_t value_bytes, const std::function<void(uint32_t)>& on_different);

}  // namespace kvtier::bench
