// The same-run yardstick for small request/reply calls: the round trip of one small message
// between two processes over a plain socket, with nothing else in the way (blocking send/recv,
// no framing, no poll, no library). An RPC on the same host cannot beat it, so a metadata call's
// latency is printed as a multiple of it.
#pragma once

#include <cstddef>
#include <vector>

#include "common/status.h"

namespace kvtier::bench {

enum class PingPongSocket {
  kLoopbackTcp,  // 127.0.0.1, TCP_NODELAY on both ends
  kUnixStream,   // an AF_UNIX SOCK_STREAM socket pair
};

// "tcp" / "unix".
const char* PingPongSocketName(PingPongSocket kind);

// Forks an echo process (it sends every `message_bytes` message straight back), then this
// process sends a message and waits for its echo, `warmup` times untimed and `count` times timed.
// Returns each timed round trip in microseconds. Forks: call it while this process has no other
// threads.
Result<std::vector<double>> MeasurePingPong(PingPongSocket kind, size_t message_bytes, size_t count,
                                            size_t warmup);

}  // namespace kvtier::bench
