// The kvtier cache-server protocol: request types and version. docs/protocol.md is the
// byte-level description; this header is its source of truth. Request type values are only
// ever appended, never renumbered or reused.
#pragma once

#include <cstdint>
#include <string>

namespace kvtier::wire {

// Bumped on any incompatible change. A server accepts clients whose major version equals its own.
inline constexpr uint32_t kProtocolVersion = 1;
// The longest QUERY_PREFETCH_STATUS long poll (`wait_us`) a server holds; longer ones are cut.
inline constexpr uint64_t kMaxStatusWaitUs = 10'000'000;
// The cache server's ZMQ port when none is given: `kvtier server`, CacheClient and the Python
// client (kvtier.DEFAULT_PORT) share it, so each side finds the other without configuration.
inline constexpr uint16_t kDefaultServerPort = 5555;

enum class RequestType : uint32_t {
  kHello = 1,
  kRegisterKvBuffers = 2,
  kUnregisterKvBuffers = 3,
  kStore = 4,
  kRetrieve = 5,
  kLookup = 6,
  kQueryPrefetchStatus = 7,
  kFreeLookupLocks = 8,
  kEndSession = 9,
  kPing = 10,
  kClear = 11,
  kStats = 12,
  kEvict = 13,
};
inline constexpr uint32_t kMaxRequestType = 13;

// "STORE", or "UNKNOWN" for values outside the enum.
const char* RequestTypeName(uint32_t type);

// Abstract Unix socket name (leading NUL implied) where a server on `port` takes buffer fds.
std::string UdsNameForPort(uint16_t port);

}  // namespace kvtier::wire
