// The ZMQ envelope. A request is three frames: request id, request type, body; each of the first
// two is one msgpack unsigned integer, the body is one msgpack map. The server's ROUTER sees the
// peer identity in front; replies carry the same id and type back, so a client can match
// out-of-order replies by id.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kvtier::wire {

inline constexpr size_t kRequestFrames = 3;

std::string EncodeUintFrame(uint64_t v);
// The frame must hold exactly one msgpack non-negative integer.
Result<uint64_t> DecodeUintFrame(const void* data, size_t size);

}  // namespace kvtier::wire
