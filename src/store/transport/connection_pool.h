// Idle data-plane connections kept per peer endpoint, so a batch does not pay a TCP handshake (and
// the AUTH and PROOF round trips) per op. A connection is handed out to one batch at a time and
// comes back only if that batch left it in sync; a broken one is simply closed. A pooled
// connection whose peer has gone (FIN or RST already received) is noticed at Acquire and replaced.
// A peer whose connect failed slowly (no route or no answer: its host or a link is down; a refusal
// is immediate anyway) is taken as unreachable: one caller at a time redials it, at most every
// redial_interval, and the others fail at once with its last error instead of each waiting out
// their deadline. A connect that succeeds, or is refused, ends that.
// Thread-safety: every method may be called concurrently; the mutex guards the idle lists only,
// never a connect.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/status.h"
#include "store/transport/tcp_io.h"
#include "wire/fd_passing.h"

namespace kvtier::store {

// A connection handed out by ConnectionPool::Acquire, to give back with Release.
struct PooledConnection {
  wire::UniqueFd fd;        // non-blocking, TCP_NODELAY, authenticated
  uint64_t generation = 0;  // of the endpoint when handed out (Forget bumps it)
};

class ConnectionPool {
 public:

  // `clock` decides when an unreachable peer is dialled again (nullptr = Clock::Real()); a
  // dial itself always runs on real time.
  ConnectionPool(size_t max_idle_per_peer, std::string auth_token,
                 std::chrono::milliseconds redial_interval = std::chrono::seconds(2),
                 const Clock* clock = nullptr);

  // A pooled connection that is still alive, or a new one (connect, then AUTH and PROOF when a
  // secret is set).
  // kIoError: refused/reset/unreachable; kTimeout: no answer before the deadline;
  // kPermissionDenied: the peer rejected the proof.
  Result<PooledConnection> Acquire(const std::string& endpoint, tcp::Deadline deadline);

  // Gives back a connection that is in sync (no request outstanding). Closed instead when the
  // endpoint was forgotten since Acquire or the peer already has max_idle_per_peer idle ones.
  void Release(const std::string& endpoint, PooledConnection conn);

  void Forget(const std::string& endpoint);
  size_t IdleCount(const std::string& endpoint) const;

 private:
  struct Peer {
    uint64_t generation = 0;
    std::vector<wire::UniqueFd> idle;
    bool unreachable = false;
    bool redialling = false;       // a caller is dialling it now
    int64_t redial_at_ns = 0;      // when unreachable: the next dial, not before (clock_)
    int64_t failed_at_ns = 0;
    Status last_error;
  };

  Result<wire::UniqueFd> Dial(const std::string& endpoint, tcp::Deadline deadline);
  // Records how a dial ended; under mu_.
  void NoteDial(const std::string& endpoint, Peer& peer, const Status& result,
                tcp::SteadyClock::duration took);

  const size_t max_idle_;
  const std::string token_;
  const std::chrono::milliseconds redial_interval_;
  const Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, Peer> peers_;
};

}  // namespace kvtier::store
