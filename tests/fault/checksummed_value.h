// Values the fault tests write and read back. Each one names its key and carries a checksum, so
// a read that returns another key's bytes, an older version's bytes, zeros or a torn write is
// caught — not only a missing value. Layout: [8-byte key hash][8-byte version][payload]
// [8-byte FNV-1a of everything before it]; the payload is pseudo-random from (key, version).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace kvtier::fault {

inline uint64_t Fnv1a(const uint8_t* p, size_t n, uint64_t h = 14695981039346656037ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

inline uint64_t KeyHash(std::string_view key) {
  return Fnv1a(reinterpret_cast<const uint8_t*>(key.data()), key.size());
}

inline constexpr size_t kValueOverhead = 24;  // key hash, version, checksum

// A value of exactly `size` bytes (>= kValueOverhead) for `key`.
inline std::vector<uint8_t> MakeValue(std::string_view key, size_t size, uint64_t version = 0) {
  std::vector<uint8_t> v(size < kValueOverhead ? kValueOverhead : size);
  const uint64_t kh = KeyHash(key);
  std::memcpy(v.data(), &kh, 8);
  std::memcpy(v.data() + 8, &version, 8);
  uint64_t x = kh ^ (version * 0x9e3779b97f4a7c15ull) ^ 0x2545f4914f6cdd1dull;
  for (size_t i = 16; i + 8 < v.size(); i += 8) {  // xorshift64 payload, 8 bytes a step
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, v.size() - 8 - i));
  }
  const uint64_t sum = Fnv1a(v.data(), v.size() - 8);
  std::memcpy(v.data() + v.size() - 8, &sum, 8);
  return v;
}

// "" when `bytes` is a whole, intact value written for `key`; otherwise what is wrong with it.
inline std::string CheckValue(std::string_view key, std::span<const uint8_t> bytes) {
  if (bytes.size() < kValueOverhead) return "value shorter than its header";
  uint64_t kh = 0, sum = 0;
  std::memcpy(&kh, bytes.data(), 8);
  std::memcpy(&sum, bytes.data() + bytes.size() - 8, 8);
  if (sum != Fnv1a(bytes.data(), bytes.size() - 8)) return "checksum mismatch (torn or corrupted)";
  if (kh != KeyHash(key)) return "intact value of another key";
  return "";
}

// The version a valid value was written with (call after CheckValue returned "").
inline uint64_t ValueVersion(std::span<const uint8_t> bytes) {
  uint64_t version = 0;
  std::memcpy(&version, bytes.data() + 8, 8);
  return version;
}

}  // namespace kvtier::fault
