#include "server/session_manager.h"

namespace kvtier {

std::shared_ptr<Session> SessionManager::GetOrCreate(const std::string& request_id) {
  const int64_t now = clock_.NowNs();
  if (request_id.empty()) {
    auto s = std::make_shared<Session>();
    s->last_used_ns = now;
    return s;
  }
  std::lock_guard lock(mu_);
  auto& slot = sessions_[request_id];
  if (!slot) slot = std::make_shared<Session>();
  slot->last_used_ns = now;
  return slot;
}

std::shared_ptr<Session> SessionManager::Find(const std::string& request_id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(request_id);
  if (it == sessions_.end()) return nullptr;
  it->second->last_used_ns = clock_.NowNs();
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
  const int64_t now = clock_.NowNs();
  const int64_t ttl_ns = std::chrono::nanoseconds(ttl_).count();
  std::vector<std::shared_ptr<Session>> expired;
  {
    std::lock_guard lock(mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (now - it->second->last_used_ns > ttl_ns) {
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
