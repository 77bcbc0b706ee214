// Read leases. GetReplicas grants one: the object may not be evicted or removed until
// lease_until, because a reader may be copying its bytes. A grant never shortens a lease
// (lease_until = max(old, now + ttl)). Times are Clock::NowNs() values.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace kvtier::store {

inline int64_t GrantLease(int64_t lease_until_ns, int64_t now_ns, std::chrono::nanoseconds ttl) {
  return std::max(lease_until_ns, now_ns + static_cast<int64_t>(ttl.count()));
}

inline bool LeaseLive(int64_t lease_until_ns, int64_t now_ns) { return lease_until_ns > now_ns; }

}  // namespace kvtier::store
