#include "l1/s3fifo_policy.h"

#include <algorithm>

namespace kvtier {

void S3FifoPolicy::OnInsert(const ObjectKey& key) {
  if (index_.contains(key)) {
    OnAccess(key);
    return;
  }
  bool to_main = false;
  if (auto g = ghost_index_.find(key); g != ghost_index_.end()) {
    // Seen recently and dropped by the small queue: it has proven reuse, skip the filter.
    ghost_.erase(g->second);
    ghost_index_.erase(g);
    to_main = true;
  }
  Queue& queue = to_main ? main_ : small_;
  queue.push_back(key);
  index_.emplace(key, Entry{std::prev(queue.end()), to_main, 0, 0});
}

void S3FifoPolicy::OnAccess(const ObjectKey& key) {
  if (auto it = index_.find(key); it != index_.end() && it->second.freq < kMaxFreq) {
    ++it->second.freq;
  }
}

void S3FifoPolicy::OnRemove(const ObjectKey& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  const bool was_small = !it->second.in_main;
  (was_small ? small_ : main_).erase(it->second.pos);
  index_.erase(it);
  if (was_small) RememberGhost(key);
}

void S3FifoPolicy::RememberGhost(const ObjectKey& key) {
  if (ghost_index_.contains(key)) return;
  ghost_.push_back(key);
  ghost_index_.emplace(key, std::prev(ghost_.end()));
  const size_t limit = std::max(index_.size(), kMinGhost);
  while (ghost_.size() > limit) {
    ghost_index_.erase(ghost_.front());
    ghost_.pop_front();
  }
}

bool S3FifoPolicy::ForEachCandidate(const std::function<bool(const ObjectKey&)>& visit) {
  ++walk_;
  // Offered keys stay in their queue (moved to the back) until the pool removes them, so count
  // them to know when each queue has nothing new to offer. Terminates: every step offers a key,
  // promotes one, or lowers a frequency, each bounded per key.
  size_t offered_small = 0;
  size_t offered_main = 0;
  while (true) {
    const bool small_left = offered_small < small_.size();
    const bool main_left = offered_main < main_.size();
    if (!small_left && !main_left) return false;
    const bool use_small = small_left && (!main_left || small_.size() * 10 >= index_.size());
    Queue& queue = use_small ? small_ : main_;
    const ObjectKey& key = queue.front();
    Entry& entry = index_.find(key)->second;
    if (entry.walk == walk_) {  // offered already in this walk
      queue.splice(queue.end(), queue, entry.pos);
      continue;
    }
    if (use_small && entry.freq > 1) {
      main_.splice(main_.end(), small_, entry.pos);
      entry.in_main = true;
      entry.freq = 0;
      continue;
    }
    if (!use_small && entry.freq > 0) {
      --entry.freq;
      main_.splice(main_.end(), main_, entry.pos);
      continue;
    }
    entry.walk = walk_;
    ++(use_small ? offered_small : offered_main);
    queue.splice(queue.end(), queue, entry.pos);
    if (visit(key)) return true;
  }
}

}  // namespace kvtier
