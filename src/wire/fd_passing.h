// Passing file descriptors between processes over an abstract Unix socket (SCM_RIGHTS), and the
// tiny hand-off exchange a worker uses to give the server its KV-buffer memfds:
//   request : "KVTF" | u32 version (=1) | u32 fd count            (12 bytes, little-endian)
//             with the fds attached as SCM_RIGHTS ancillary data
//   reply   : u32 status code | u64 token | u32 message length | message bytes
// The token is then named in REGISTER_KV_BUFFERS. The server checks the peer's uid.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::wire {

inline constexpr uint32_t kMaxHandoffFds = 64;

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd();
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.Release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept;
  int get() const { return fd_; }
  int Release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// Fills `addr` with the abstract-namespace name (truncated to fit); returns the address length.
socklen_t AbstractAddr(const std::string& name, sockaddr_un& addr);

Result<UniqueFd> ListenAbstract(const std::string& name);
Result<UniqueFd> ConnectAbstract(const std::string& name);

Status SendWithFds(int sock, const void* data, size_t len, std::span<const int> fds);
// Receives one message (up to `cap` bytes) and up to kMaxHandoffFds fds (owned by the caller).
Result<size_t> RecvWithFds(int sock, void* buf, size_t cap, std::vector<UniqueFd>& fds);

Result<uid_t> PeerUid(int sock);
// The peer's pid as this process's pid namespace sees it; 0 when the peer is in a namespace
// that is not visible from here.
Result<pid_t> PeerPid(int sock);

// Client side of the hand-off: sends `fds` to the server listening on `uds_name`, returns the
// token to put in REGISTER_KV_BUFFERS.
Result<uint64_t> HandOffFds(const std::string& uds_name, std::span<const int> fds);

// Server side helpers: parse a request, build a reply.
Result<uint32_t> ParseHandoffRequest(const void* data, size_t len);  // returns the fd count
std::string BuildHandoffReply(const Status& status, uint64_t token);

}  // namespace kvtier::wire
