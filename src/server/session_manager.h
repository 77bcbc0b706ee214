// Per-request sessions, keyed by the engine's request id. A session caches the chain hashes of
// the request's tokens (so repeated STORE/RETRIEVE calls only hash new chunks) and holds the
// state of its LOOKUP job and the read locks that job took. Idle sessions expire; their pins are
// handed back to the caller of Sweep() to release. Idleness is measured on the injected clock, so
// tests expire sessions by advancing a FakeClock.
// Thread-safety: every method may be called from any thread (one mutex for the map); a Session's
// own fields are guarded by its `mu`.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/object_key.h"
#include "server/held_replies.h"

namespace kvtier {

struct Session {
  std::mutex mu;  // guards everything below
  std::vector<uint32_t> hashed_tokens;  // tokens whose full chunks are in `hashes`
  std::vector<ChunkHash> hashes;
  bool lookup_running = false;
  std::optional<uint64_t> lookup_hits;  // set when the LOOKUP job finished
  std::vector<ObjectKey> lookup_pins;   // read locks held for the coming RETRIEVEs
  // QUERY_PREFETCH_STATUS long polls waiting for the running job (at most kMaxStatusWaiters).
  std::vector<HeldReplies::Ticket> status_waiters;
  static constexpr size_t kMaxStatusWaiters = 16;
  int64_t last_used_ns = 0;  // on the manager's clock; touched only under the manager's mutex
};

class SessionManager {
 public:
  explicit SessionManager(std::chrono::milliseconds ttl, Clock& clock = *Clock::Real())
      : ttl_(ttl), clock_(clock) {}

  // An empty id gets a fresh session that is not remembered.
  std::shared_ptr<Session> GetOrCreate(const std::string& request_id);
  std::shared_ptr<Session> Find(const std::string& request_id);
  std::shared_ptr<Session> Remove(const std::string& request_id);
  // Removes sessions idle for longer than the TTL and returns the pins they still held.
  std::vector<ObjectKey> Sweep();
  size_t Count() const;

 private:
  std::chrono::milliseconds ttl_;
  Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;
};

}  // namespace kvtier
