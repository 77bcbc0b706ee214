// Idle data-plane connections kept per peer endpoint, so a batch does not pay a TCP handshake (and
// an AUTH round trip) per op. A connection is handed out to one batch at a time and comes back
// only if that batch left it in sync; a broken one is simply closed. A pooled connection whose
// peer has gone (FIN or RST already received) is noticed at Acquire and replaced.
// Thread-safety: every method may be called concurrently; the mutex guards the idle lists only,
// never a connect.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"
#include "store/transport/tcp_io.h"
#include "wire/fd_passing.h"

namespace kvtier::store {

class ConnectionPool {
 public:
  struct Lease {
    wire::UniqueFd fd;        // non-blocking, TCP_NODELAY, authenticated
    uint64_t generation = 0;  // of the endpoint when handed out (Forget bumps it)
  };

  ConnectionPool(size_t max_idle_per_peer, std::string auth_token);

  // A pooled connection that is still alive, or a new one (connect, then AUTH when a token is set).
  // kIoError: refused/reset; kTimeout: no answer before the deadline; kPermissionDenied: the peer
  // rejected the token.
  Result<Lease> Acquire(const std::string& endpoint, tcp::Deadline deadline);

  // Gives back a connection that is in sync (no request outstanding). Closed instead when the
  // endpoint was forgotten since Acquire or the peer already has max_idle_per_peer idle ones.
  void Release(const std::string& endpoint, Lease lease);

  void Forget(const std::string& endpoint);
  size_t IdleCount(const std::string& endpoint) const;

 private:
  Result<wire::UniqueFd> Dial(const std::string& endpoint, tcp::Deadline deadline);

  const size_t max_idle_;
  const std::string token_;
  mutable std::mutex mu_;
  struct Peer {
    uint64_t generation = 0;
    std::vector<wire::UniqueFd> idle;
  };
  std::map<std::string, Peer> peers_;
};

}  // namespace kvtier::store
