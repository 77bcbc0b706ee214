// Small TCP helpers for the data plane: "host:port" parsing, a listener bound to one host, a
// connect bounded by a deadline, and whole-buffer send/recv on non-blocking sockets that wait with
// poll() until a deadline. Every socket gets TCP_NODELAY (requests and replies are small headers
// followed by the payload; Nagle would hold the header back).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "wire/fd_passing.h"

namespace kvtier::store::tcp {

using SteadyClock = std::chrono::steady_clock;  // not kvtier::Clock: sockets wait in real time
using Deadline = SteadyClock::time_point;

struct Endpoint {
  std::string host;
  uint16_t port = 0;
};

// "127.0.0.1:50052", "localhost:1", "[::1]:9". Port 1..65535.
Result<Endpoint> ParseEndpoint(std::string_view text);

// A listening socket bound to exactly `host` (never a wildcard unless host names one) with
// SO_REUSEADDR; port 0 picks a free port (read it back with LocalPort).
Result<wire::UniqueFd> Listen(const std::string& host, uint16_t port, int backlog);
Result<uint16_t> LocalPort(int fd);

// A connected non-blocking socket with TCP_NODELAY. Refused -> kIoError at once; no answer before
// the deadline -> kTimeout.
Result<wire::UniqueFd> Connect(const std::string& endpoint, Deadline deadline);

// Whole-buffer I/O on a non-blocking socket (MSG_NOSIGNAL). kTimeout at the deadline, kIoError
// when the peer closes or resets.
Status SendAll(int fd, const void* data, size_t len, Deadline deadline);
Status RecvAll(int fd, void* data, size_t len, Deadline deadline);

// Milliseconds left until `deadline` for poll(): 0 when passed, rounded up, capped to fit an int.
int PollTimeoutMs(Deadline deadline);

void SetNoDelay(int fd);

// "host:port" of a connected socket's peer, numeric ("?:?" when unknown); for logs and errors.
std::string PeerName(int fd);

}  // namespace kvtier::store::tcp
