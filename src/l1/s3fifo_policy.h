// S3-FIFO (Yang et al., SOSP 2023): a small FIFO that filters one-hit wonders, a main FIFO with
// lazy promotion, and a ghost FIFO that remembers keys recently dropped from the small queue.
// - A new key enters the small queue, or the main queue when its key is still a ghost.
// - Accesses only bump a 2-bit frequency; nothing moves on the hit path.
// - Choosing victims: take from the small queue while it holds >= 10% of the keys, else from main.
//   A small-queue key accessed more than once is promoted to main instead of offered; a main key
//   with frequency > 0 is decremented and reinserted. Everything else is offered.
// Sizes are counted in objects, not bytes: the pool's objects are chunks of one size.
// An offered key moves to the back of its queue, so a key the pool refuses (pinned) is not
// offered again on the next walk before the others.
// Not thread-safe: the pool serialises calls under its own mutex (eviction_policy.h).
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>

#include "l1/eviction_policy.h"

namespace kvtier {

class S3FifoPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "S3FIFO"; }
  void OnInsert(const ObjectKey& key) override;
  void OnAccess(const ObjectKey& key) override;
  void OnRemove(const ObjectKey& key) override;
  bool ForEachCandidate(const std::function<bool(const ObjectKey&)>& visit) override;
  size_t Size() const override { return index_.size(); }

  // For tests.
  size_t small_size() const { return small_.size(); }
  size_t main_size() const { return main_.size(); }
  size_t ghost_size() const { return ghost_.size(); }

 private:
  using Queue = std::list<ObjectKey>;
  struct Entry {
    Queue::iterator pos;
    bool in_main = false;
    uint8_t freq = 0;   // saturates at kMaxFreq
    uint64_t walk = 0;  // id of the last walk that offered this key
  };
  static constexpr uint8_t kMaxFreq = 3;
  static constexpr size_t kMinGhost = 1024;

  void RememberGhost(const ObjectKey& key);

  Queue small_;  // front = oldest
  Queue main_;   // front = oldest
  std::unordered_map<ObjectKey, Entry, ObjectKeyHash> index_;
  Queue ghost_;  // front = oldest
  std::unordered_map<ObjectKey, Queue::iterator, ObjectKeyHash> ghost_index_;
  uint64_t walk_ = 0;
};

}  // namespace kvtier
