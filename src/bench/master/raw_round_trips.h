// The same-run floor of `kvtier bench master`'s batch calls: the round trip of a small message over
// plain loopback TCP with `threads` clients at once, each on its own connection to an echo thread
// of its own (the master's listener also serves each connection on a thread). Blocking send and
// recv, TCP_NODELAY, no framing and no decoding: a master RPC under the same concurrency on the
// same cores cannot beat it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace kvtier::bench {

struct RawRoundTrips {
  uint64_t count = 0;  // round trips, all threads
  double p50_us = 0;
  double p99_us = 0;
  double per_second = 0;  // all threads together
};

// `threads` clients echo `message_bytes` messages for `seconds` (after 200 untimed each).
Result<RawRoundTrips> MeasureRawRoundTrips(uint32_t threads, size_t message_bytes, double seconds);

}  // namespace kvtier::bench
