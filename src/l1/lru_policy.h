// Least recently used: a list ordered oldest -> newest plus a hash index into it, so every
// operation is O(1). Inserting or accessing a key moves it to the newest end.
// Not thread-safe: the pool serialises calls under its own mutex (eviction_policy.h).
#pragma once

#include <list>
#include <unordered_map>

#include "l1/eviction_policy.h"

namespace kvtier {

class LruPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "LRU"; }
  void OnInsert(const ObjectKey& key) override;
  void OnAccess(const ObjectKey& key) override;
  void OnRemove(const ObjectKey& key) override;
  bool ForEachCandidate(const std::function<bool(const ObjectKey&)>& visit) override;
  size_t Size() const override { return index_.size(); }

 private:
  std::list<ObjectKey> order_;  // front = least recently used
  std::unordered_map<ObjectKey, std::list<ObjectKey>::iterator, ObjectKeyHash> index_;
};

}  // namespace kvtier
