// The dummy socket's transport: an abstract-namespace AF_UNIX SOCK_STREAM socket carrying the
// length-prefixed frames of dummy_protocol.h. A stream socket (not wire::ListenAbstract's
// SOCK_SEQPACKET) because a batch frame may be megabytes, far over a datagram's size limit.
// File descriptors ride as SCM_RIGHTS on the first byte of the frame they belong to; the reader
// reads exactly one frame at a time, so fds arrive with the frame that carried them and never
// with a neighbour.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "wire/fd_passing.h"

namespace kvtier::store::dummy {

Result<wire::UniqueFd> ListenSocket(const std::string& abstract_name);
Result<wire::UniqueFd> ConnectSocket(const std::string& abstract_name);

// SO_RCVTIMEO / SO_SNDTIMEO; 0 = block forever. A timed-out read or write returns kTimeout.
Status SetSocketTimeouts(int fd, std::chrono::milliseconds recv, std::chrono::milliseconds send);

// Sends a whole frame (loops over partial writes). `pass_fd` >= 0 rides along as SCM_RIGHTS.
// A peer that is already gone before any byte left gives kUnavailable (the request was surely
// not received: safe to retry elsewhere); a failure part-way gives kIoError.
Status SendFrame(int fd, const std::string& frame, int pass_fd = -1);

struct Frame {
  uint32_t type = 0;
  std::string body;
  std::vector<wire::UniqueFd> fds;  // what arrived with this frame (usually none)
};

// Reads one frame. nullopt: the peer closed cleanly between frames. A close mid-frame is
// kProtocolError ("truncated frame"), a body over `max_length` kTooLarge (the body is not read:
// the stream cannot be trusted after that), a timeout kTimeout, other failures kIoError.
Result<std::optional<Frame>> RecvFrame(int fd, uint32_t max_length);

}  // namespace kvtier::store::dummy
