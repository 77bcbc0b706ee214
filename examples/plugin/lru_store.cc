#include "lru_store.h"

namespace kvtier_example {

LruStore::PutResult LruStore::Put(const std::string& key, Value value) {
  const uint64_t charge = Charge(key, value);
  if (charge > capacity_) return PutResult::kTooLarge;
  std::lock_guard lock(mu_);
  if (map_.contains(key)) return PutResult::kAlreadyPresent;
  while (used_ + charge > capacity_) {
    EraseLocked(map_.find(recency_.back()));
  }
  recency_.push_front(key);
  map_.emplace(key, Entry{std::move(value), recency_.begin()});
  used_ += charge;
  return PutResult::kStored;
}

LruStore::Value LruStore::Get(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  recency_.splice(recency_.begin(), recency_, it->second.recency);
  return it->second.value;
}

bool LruStore::Touch(const std::string& key) { return Get(key) != nullptr; }

bool LruStore::Erase(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return false;
  EraseLocked(it);
  return true;
}

void LruStore::EraseLocked(std::unordered_map<std::string, Entry>::iterator it) {
  used_ -= Charge(it->first, it->second.value);
  recency_.erase(it->second.recency);
  map_.erase(it);
}

}  // namespace kvtier_example
