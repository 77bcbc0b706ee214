// The client end of one plain-socket RPC connection (rpc_records.h): dial, the secret channel's
// handshake (wire/secret_channel.h), then calls, one at a time, each a record out and its reply
// back. The socket blocks in the kernel for at most 100 ms per wait, so a call costs one send and
// one recv in the common case and still notices its deadline and `abandoned`.
// Thread-safety: one caller at a time (the master client keeps a pool of channels).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"
#include "store/transport/rpc_records.h"
#include "store/transport/tcp_io.h"
#include "wire/fd_passing.h"

namespace kvtier::store::rpc {

struct ChannelOptions {
  std::string address;      // "host:port"
  std::string secret;       // empty: no authentication
  std::string peer;         // names the other side in errors: "the master at 127.0.0.1:50051"
  size_t max_payload = 0;   // the largest reply record accepted
};

class Channel {
 public:
  // Connects and runs the handshake. kIoError: refused or reset (worth another try); kTimeout:
  // no answer by the deadline; kPermissionDenied: authentication failed, with a message that
  // says why ("refused authentication", "requires authentication", ...); kProtocolError: the
  // peer is not a kvtier RPC server of this version; kUnavailable: `abandoned` became true.
  static Result<std::unique_ptr<Channel>> Open(const ChannelOptions& options,
                                               tcp::Deadline deadline,
                                               const std::atomic<bool>* abandoned);

  // One request and its reply body. kTimeout at the deadline, kUnavailable when `abandoned`
  // becomes true (checked every 100 ms), kIoError when the connection breaks, kProtocolError or
  // kPermissionDenied when the reply cannot be trusted. After any error the channel is unusable.
  Result<std::string> Call(uint64_t id, uint32_t op, std::string_view body,
                           tcp::Deadline deadline, const std::atomic<bool>* abandoned);

  // True when the peer has closed the connection (or sent something nobody asked for) since the
  // last call: a pooled channel to a master that restarted. One non-blocking peek.
  bool Stale() const;

 private:
  Channel(wire::UniqueFd fd, const ChannelOptions& options, const wire::HandshakeKeys* keys);

  wire::UniqueFd fd_;
  std::string peer_;
  std::unique_ptr<wire::RecordCipher> seal_;
  RecordReader reader_;
  std::string out_;
};

}  // namespace kvtier::store::rpc
