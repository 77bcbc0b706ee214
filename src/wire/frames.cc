#include "wire/frames.h"

#include <msgpack.hpp>

namespace kvtier::wire {

std::string EncodeUintFrame(uint64_t v) {
  msgpack::sbuffer buf;
  msgpack::pack(buf, v);
  return std::string(buf.data(), buf.size());
}

Result<uint64_t> DecodeUintFrame(const void* data, size_t size) {
  if (size == 0 || size > 9) {
    return Status(Code::kProtocolError, "id/type frame must be one msgpack integer (1-9 bytes)");
  }
  try {
    std::size_t off = 0;
    auto oh = msgpack::unpack(static_cast<const char*>(data), size, off);
    if (off != size || oh.get().type != msgpack::type::POSITIVE_INTEGER) {
      return Status(Code::kProtocolError, "id/type frame must be one msgpack unsigned integer");
    }
    return oh.get().via.u64;
  } catch (const std::exception& e) {
    return Status(Code::kProtocolError, std::string("id/type frame: ") + e.what());
  }
}

}  // namespace kvtier::wire
