// Whole-buffer I/O on a blocking socket, for the benches' raw yardsticks (raw_tcp_probe.h,
// ping_pong_probe.h): they measure what the kernel does, so they use plain send/recv with no
// deadline and no poll.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvtier::bench {

// send() until all `len` bytes are out (EINTR retried, MSG_NOSIGNAL); false on an error or a
// closed peer.
bool SendBlocking(int fd, const uint8_t* p, size_t len);
// recv() with MSG_WAITALL until all `len` bytes are in (EINTR retried); false on an error or end
// of stream.
bool RecvBlocking(int fd, uint8_t* p, size_t len);
// Clears O_NONBLOCK (the store's tcp::Connect hands out non-blocking sockets).
void MakeBlocking(int fd);

}  // namespace kvtier::bench
