// The same-run yardstick for the data plane: how fast this machine streams bytes over one plain
// loopback TCP connection (one sender thread, one receiver thread, blocking sockets, TCP_NODELAY,
// each message received whole with MSG_WAITALL). Benches print the data plane's GB/s next to it.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace kvtier::store {

// Streams `count` messages of `message_bytes` over 127.0.0.1 and returns GB/s (1e9 bytes/s),
// timed from the first send until the receiver acknowledges the last byte.
Result<double> MeasureRawLoopbackTcp(size_t message_bytes, size_t count);

}  // namespace kvtier::store
