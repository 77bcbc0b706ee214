// The --server endpoint of `bench server`: "HOST:PORT" parsed, and checked to accept TCP
// connections before anything else runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "common/status.h"

namespace kvtier::bench {

// "host:port" -> (host, port); nullopt when malformed.
std::optional<std::pair<std::string, uint16_t>> ParseEndpoint(const std::string& s);

// Whether a TCP connection to host:port succeeds now (a plain socket, so it is safe before
// fork(); a ZMQ client would instead wait for its whole timeout on a wrong address).
Status CheckTcpReachable(const std::string& host, uint16_t port);

}  // namespace kvtier::bench
