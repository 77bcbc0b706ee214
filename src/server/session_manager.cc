#include "server/session_manager.h"

namespace kvtier {

std::shared_ptr<Session> SessionManager::GetOrCreate(const std::string& request_id) {
  const auto now = std::chrono::steady_clock::now();
  if (request_id.empty()) {
    auto s = std::make_shared<Session>();
    s->last_used = now;
    return s;
  }
  std::lock_guard lock(mu_);
  auto& slot = sessions_[request_id];
  if (!slot) slot = std::make_shared<Session>();
  slot->last_used = now;  // last_used is only touched under mu_
  return slot;
}

std::shared_ptr<Session> SessionManager::Find(const std::string& request_id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(request_id);
  if (it == sessions_.end()) return nullptr;
  it->second->last_used = std::chrono::steady_clock::now();
  return it->second;
}

std::shared_ptr<Session> SessionManager::Remove(const std::string& request_id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(request_id);
  if (it == sessions_.end()) return nullptr;
  auto s = std::move(it->second);
  sessions_.erase(it);
  return s;
}

std::vector<ObjectKey> SessionManager::Sweep() {
  const auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Session>> expired;
  {
    std::lock_guard lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (now - it->second->last_used > ttl_) {
        expired.push_back(std::move(it->second));
        it = sessions_.erase(it);
      } else {
        ++it;
      }
    }
  }
  std::vector<ObjectKey> pins;
  for (auto& s : expired) {
    std::lock_guard lock(s->mu);
    pins.insert(pins.end(), s->lookup_pins.begin(), s->lookup_pins.end());
    s->lookup_pins.clear();
  }
  return pins;
}

size_t SessionManager::Count() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace kvtier
