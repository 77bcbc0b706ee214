#include "store/master/repairs.h"

namespace kvtier::store {

void RepairQueue::Add(const std::string& key) {
  std::lock_guard lock(mu_);
  if (!pending_.contains(key)) waiting_.insert(key);
}

void RepairQueue::Drop(const std::string& key) {
  std::lock_guard lock(mu_);
  waiting_.erase(key);
}

std::vector<std::string> RepairQueue::Candidates(size_t limit) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  auto it = waiting_.upper_bound(cursor_);
  for (size_t seen = 0; seen < waiting_.size() && out.size() < limit; ++seen, ++it) {
    if (it == waiting_.end()) it = waiting_.begin();
    out.push_back(*it);
  }
  if (!out.empty()) cursor_ = out.back();
  return out;
}

bool RepairQueue::Start(const std::string& key, PendingRepair repair) {
  std::lock_guard lock(mu_);
  if (!pending_.emplace(key, std::move(repair)).second) return false;
  waiting_.erase(key);
  return true;
}

std::optional<PendingRepair> RepairQueue::Finish(const std::string& key,
                                                 const std::string& node_id) {
  std::lock_guard lock(mu_);
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second.node_id != node_id) return std::nullopt;
  PendingRepair out = std::move(it->second);
  pending_.erase(it);
  return out;
}

std::vector<std::pair<std::string, PendingRepair>> RepairQueue::Pending() const {
  std::lock_guard lock(mu_);
  return {pending_.begin(), pending_.end()};
}

size_t RepairQueue::waiting() const {
  std::lock_guard lock(mu_);
  return waiting_.size();
}

size_t RepairQueue::pending() const {
  std::lock_guard lock(mu_);
  return pending_.size();
}

}  // namespace kvtier::store
