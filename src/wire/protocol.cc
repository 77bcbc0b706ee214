#include "wire/protocol.h"

namespace kvtier::wire {

const char* RequestTypeName(uint32_t type) {
  switch (static_cast<RequestType>(type)) {
    case RequestType::kHello: return "HELLO";
    case RequestType::kRegisterKvBuffers: return "REGISTER_KV_BUFFERS";
    case RequestType::kUnregisterKvBuffers: return "UNREGISTER_KV_BUFFERS";
    case RequestType::kStore: return "STORE";
    case RequestType::kRetrieve: return "RETRIEVE";
    case RequestType::kLookup: return "LOOKUP";
    case RequestType::kQueryPrefetchStatus: return "QUERY_PREFETCH_STATUS";
    case RequestType::kFreeLookupLocks: return "FREE_LOOKUP_LOCKS";
    case RequestType::kEndSession: return "END_SESSION";
    case RequestType::kPing: return "PING";
    case RequestType::kClear: return "CLEAR";
    case RequestType::kStats: return "STATS";
    case RequestType::kEvict: return "EVICT";
  }
  return "UNKNOWN";
}

std::string UdsNameForPort(uint16_t port) { return "kvtier-server-" + std::to_string(port); }

}  // namespace kvtier::wire
