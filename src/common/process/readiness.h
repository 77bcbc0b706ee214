// Waiting with a deadline instead of sleeping: until a condition holds, until a child is ready (it
// fails at once when the child exits first), and the probes that say "ready" for the processes we
// launch: a port that accepts, an HTTP status, a line in the child's log.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/process/child.h"
#include "common/status.h"

namespace kvtier::process {

// Polls `done` every `every` until it holds or `deadline` passes; true when it held (it is asked
// once more at the deadline).
bool WaitFor(const std::function<bool()>& done, std::chrono::milliseconds deadline,
             std::chrono::milliseconds every = std::chrono::milliseconds(10));

// Polls `ready` until it holds (Ok), the child exits first (kUnavailable) or `deadline` passes
// (kTimeout). The errors name `what` and carry the tail of the child's log.
Status WaitReady(Child& child, const std::function<bool()>& ready,
                 std::chrono::milliseconds deadline, std::string_view what);

// A TCP connection to 127.0.0.1:`port` (close-on-exec): its descriptor, which the caller closes,
// or -1 when it was not accepted.
int ConnectLoopback(uint16_t port);

// True when a TCP connection to 127.0.0.1:`port` is accepted.
bool PortAccepts(uint16_t port);

// The status of GET http://127.0.0.1:`port``path` (with "Authorization: Bearer <bearer>" unless
// empty); -1 when no answer came within `timeout`.
int HttpStatus(uint16_t port, const std::string& path, const std::string& bearer = "",
               std::chrono::milliseconds timeout = std::chrono::seconds(2));

// The body of that GET when the status is 200; empty otherwise.
std::string HttpBody(uint16_t port, const std::string& path, const std::string& bearer = "",
                     std::chrono::milliseconds timeout = std::chrono::seconds(2));

// True when the child's log holds `text`.
bool LogContains(const Child& child, std::string_view text);

}  // namespace kvtier::process
