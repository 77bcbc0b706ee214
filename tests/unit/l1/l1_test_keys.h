// Keys for L1 tests: key i has chunk hash bytes derived from i.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/object_key.h"

namespace kvtier::testing {

inline ObjectKey TestKey(uint64_t i) {
  ObjectKey key;
  key.model = "test-model";
  std::memcpy(key.hash.data(), &i, sizeof(i));
  key.hash[15] = 0x5a;
  return key;
}

inline std::vector<ObjectKey> TestKeys(uint64_t first, uint64_t count) {
  std::vector<ObjectKey> keys;
  for (uint64_t i = first; i < first + count; ++i) keys.push_back(TestKey(i));
  return keys;
}

}  // namespace kvtier::testing
