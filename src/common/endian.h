// Little-endian loads and stores of fixed-width unsigned integers in byte buffers: the one place
// that knows the byte order of kvtier's own formats (dummy and data-plane frames, fs object
// headers, fd-handoff replies). The layout never depends on the host; on a little-endian host
// each call is one unaligned move.
#pragma once

#include <bit>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <string>

namespace kvtier {

namespace endian_detail {
template <std::unsigned_integral T>
constexpr T ToFromLE(T v) {
  if constexpr (std::endian::native == std::endian::little || sizeof(T) == 1) {
    return v;
  } else {
    T out = 0;
    for (size_t i = 0; i < sizeof(T); ++i) {
      out = static_cast<T>((out << 8) | ((v >> (8 * i)) & 0xff));
    }
    return out;
  }
}
}  // namespace endian_detail

// Writes `v` at `p` (sizeof(T) bytes, any alignment).
template <std::unsigned_integral T>
inline void StoreLE(void* p, T v) {
  v = endian_detail::ToFromLE(v);
  std::memcpy(p, &v, sizeof(T));
}

// Reads a T from `p` (sizeof(T) bytes, any alignment).
template <std::unsigned_integral T>
inline T LoadLE(const void* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return endian_detail::ToFromLE(v);
}

// Appends `v` to a byte string being built.
template <std::unsigned_integral T>
inline void AppendLE(std::string& out, T v) {
  char bytes[sizeof(T)];
  StoreLE(bytes, v);
  out.append(bytes, sizeof(T));
}

}  // namespace kvtier
