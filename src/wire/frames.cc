#include "wire/frames.h"

#include <msgpack.hpp>

#include <cstdint>

namespace kvtier::wire {

std::string EncodeUintFrame(uint64_t v) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, v);
  return std::string(buf.data(), buf.size());
}

// Decoded by hand: handing msgpack a frame whose first byte is a container header would let a
// 5-byte frame make it allocate a 4-billion-slot array before noticing the bytes are missing.
Result<uint64_t> DecodeUintFrame(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  const Status bad(Code::kProtocolError, "id/type frame must be one msgpack unsigned integer");
  if (size == 0) return bad;
  const uint8_t tag = p[0];
  if (tag <= 0x7f) {  // positive fixint
    if (size != 1) return bad;
    return uint64_t{tag};
  }
  // uint8/16/32/64 (0xcc-0xcf) and int8/16/32/64 (0xd0-0xd3) holding a non-negative value.
  if (tag < 0xcc || tag > 0xd3) return bad;
  const size_t len = size_t{1} << ((tag - 0xcc) & 3);
  if (size != 1 + len) return bad;
  uint64_t v = 0;
  for (size_t i = 0; i < len; ++i) v = v << 8 | p[1 + i];
  if (tag >= 0xd0 && (p[1] & 0x80)) return bad;  // negative
  return v;
}

}  // namespace kvtier::wire
