// The server end of kvtier's plain-socket RPC (rpc_records.h): an accept thread and one thread per
// connection. Each connection thread runs the secret channel's handshake (wire/secret_channel.h),
// then blocks in recv, calls `serve` for every request that arrived and sends the replies, in
// order. A request costs its connection one recv and one send and no hand-off between threads:
// the fewest system calls per round trip, which is what a metadata call's latency is made of
// (docs/store/master_rpc.md). Connections run in parallel, so `serve` must be thread-safe.
// A connection that breaks the stream (a record over the limit, shorter than its envelope, or one
// that fails authentication) is closed; one that has not finished its handshake within 10 s too.
// Thread-safety: Start and Stop belong to the owner; the hooks run on the connection threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier::store::rpc {

struct ListenerHooks {
  // One request's reply body.
  std::function<std::string(uint32_t op, std::string_view body)> serve;
  // A connection closed for a broken stream (`reason` "envelope"), or a handshake refused or cut
  // short: "no_token", "wrong_token", "bad_handshake", "incomplete_handshake". `detail` names
  // the peer and what happened.
  std::function<void(const char* reason, const std::string& detail)> rejected;
};

class Listener {
 public:
  Listener(size_t max_payload, ListenerHooks hooks);
  ~Listener();  // Stop()
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds host:port (an error names both) and starts the thread. A non-empty `secret` admits only
  // clients that prove it. Call once.
  Status Start(const std::string& host, uint16_t port, std::string secret);
  // Closes the listener and every connection; the port is free when it returns.
  void Stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store::rpc
