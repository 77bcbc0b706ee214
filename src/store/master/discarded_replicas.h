// Replicas whose key is gone but whose space somebody may still touch, freed at a set time:
//  - preempted puts: after put_start_discard_timeout another put may take the key, but the old
//    writer may still be writing, so the space waits for put_start_time + put_start_release_timeout;
//  - revoked puts (late bytes of the failed write), and objects removed with `force` while a
//    reader held a lease (until the lease ends).
// Thread-safe (own mutex, taken under a shard lock; lock order shard -> discarded -> pool).
#pragma once

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

#include "store/master/segment_pool.h"

namespace kvtier::store {

class DiscardedReplicas {
 public:
  void Add(std::vector<Replica> replicas, int64_t release_at_ns) {
    std::lock_guard lock(mu_);
    for (Replica& r : replicas) {
      bytes_ += ChargedBytes(r.size);
      entries_.push_back(Entry{release_at_ns, std::move(r)});
    }
  }

  // Removes and returns the replicas whose release time has come.
  std::vector<Replica> TakeDue(int64_t now_ns) {
    std::vector<Replica> due;
    std::lock_guard lock(mu_);
    auto due_begin = std::partition(entries_.begin(), entries_.end(),
                                    [now_ns](const Entry& e) { return e.release_at_ns > now_ns; });
    for (auto it = due_begin; it != entries_.end(); ++it) {
      bytes_ -= ChargedBytes(it->replica.size);
      due.push_back(std::move(it->replica));
    }
    entries_.erase(due_begin, entries_.end());
    return due;
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return entries_.size();
  }
  uint64_t bytes() const {
    std::lock_guard lock(mu_);
    return bytes_;
  }

 private:
  struct Entry {
    int64_t release_at_ns;
    Replica replica;
  };
  mutable std::mutex mu_;
  std::vector<Entry> entries_;  // few: stalled writers, failed writes, forced removes
  uint64_t bytes_ = 0;
};

}  // namespace kvtier::store
