// The same-run yardstick for the data plane: how fast this machine streams bytes over one plain
// loopback TCP connection (one sender thread, one receiver thread, blocking sockets, TCP_NODELAY,
// each message received whole with MSG_WAITALL). Benches print the data plane's GB/s next to it.
#pragma once

#include <cstddef>

#include "common/status.h"

namespace kvtier::bench {

struct RawTcpThroughput {
  double gbps = 0;               // 1e9 bytes per wall-clock second
  double gb_per_cpu_second = 0;  // bytes per CPU-second of the two threads (the copy cost)
};

// Streams `count` messages of `message_bytes` over 127.0.0.1, timed from the first send until the
// receiver acknowledges the last byte. With pool_bytes == 0 both ends reuse one message buffer
// (it stays in cache: the upper bound); otherwise message i is sent from and received into slice
// i of a pool of pool_bytes on each side (allocated, and sent through once, before the clock
// starts), like transfers between a long-lived segment and buffer that live in DRAM.
Result<RawTcpThroughput> MeasureRawLoopbackTcp(size_t message_bytes, size_t count,
                                               size_t pool_bytes = 0);

}  // namespace kvtier::bench
