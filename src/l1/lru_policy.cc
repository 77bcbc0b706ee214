#include "l1/lru_policy.h"

namespace kvtier {

void LruPolicy::OnInsert(const ObjectKey& key) {
  if (auto it = index_.find(key); it != index_.end()) {
    order_.splice(order_.end(), order_, it->second);
    return;
  }
  order_.push_back(key);
  index_.emplace(key, std::prev(order_.end()));
}

void LruPolicy::OnAccess(const ObjectKey& key) {
  // splice keeps the node (and so the iterator in the index) valid.
  if (auto it = index_.find(key); it != index_.end()) {
    order_.splice(order_.end(), order_, it->second);
  }
}

void LruPolicy::OnRemove(const ObjectKey& key) {
  if (auto it = index_.find(key); it != index_.end()) {
    order_.erase(it->second);
    index_.erase(it);
  }
}

bool LruPolicy::ForEachCandidate(const std::function<bool(const ObjectKey&)>& visit) {
  for (const ObjectKey& key : order_) {
    if (visit(key)) return true;
  }
  return false;
}

}  // namespace kvtier
