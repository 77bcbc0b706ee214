// Per-client count of requests the server is still working on, and the limit on it
// (--max-inflight-per-client). A request that leaves work queued (a transfer, a registration, an
// admin request, a LOOKUP's job) takes a slot of its client when it arrives and gives it back when
// that work is done; a client holding the limit gets BUSY at once instead of a place in a queue,
// so one client cannot fill the server's queues and make everyone else wait behind it. Requests
// answered on the socket thread and done (PING, QUERY_PREFETCH_STATUS, ...) take no slot.
// Thread-safety: TryTake and Give may be called from any thread (one mutex); a slot gives itself
// back from whichever thread finishes the work.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kvtier {

class ClientInflight : public std::enable_shared_from_this<ClientInflight> {
 public:
  // Given back when its last copy is dropped, from any thread.
  using Slot = std::shared_ptr<void>;

  static std::shared_ptr<ClientInflight> Create(uint32_t limit) {
    return std::shared_ptr<ClientInflight>(new ClientInflight(limit));
  }

  // A slot of `client`, or nullptr when it already holds `limit()` (then `*held` is that count).
  Slot TryTake(const std::string& client, uint32_t* held);
  uint32_t Held(const std::string& client) const;
  uint32_t limit() const { return limit_; }

 private:
  explicit ClientInflight(uint32_t limit) : limit_(limit) {}
  void Give(const std::string& client);

  const uint32_t limit_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint32_t> held_;  // clients holding none are erased
};

// The slot of the request the calling thread is executing: the rpc front sets it around each
// handler call (nullptr for requests that take none). A handler whose work goes on after its
// reply (LOOKUP's job) keeps a copy until that work is done.
ClientInflight::Slot CurrentRequestSlot();

class ScopedRequestSlot {
 public:
  explicit ScopedRequestSlot(const ClientInflight::Slot& slot);
  ~ScopedRequestSlot();
  ScopedRequestSlot(const ScopedRequestSlot&) = delete;
  ScopedRequestSlot& operator=(const ScopedRequestSlot&) = delete;

 private:
  const ClientInflight::Slot* previous_;
};

}  // namespace kvtier
