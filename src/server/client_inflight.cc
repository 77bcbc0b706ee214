#include "server/client_inflight.h"

namespace kvtier {
namespace {

thread_local const ClientInflight::Slot* current_slot = nullptr;

}  // namespace

ClientInflight::Slot ClientInflight::TryTake(const std::string& client, uint32_t* held) {
  {
    std::lock_guard lock(mu_);
    uint32_t& n = held_[client];
    if (n >= limit_) {
      *held = n;
      return nullptr;
    }
    ++n;
  }
  // The deleter keeps the tracker alive: a LOOKUP job may end after the rpc front is gone.
  return Slot(static_cast<void*>(this), [self = shared_from_this(), client](void*) {
    self->Give(client);
  });
}

uint32_t ClientInflight::Held(const std::string& client) const {
  std::lock_guard lock(mu_);
  auto it = held_.find(client);
  return it == held_.end() ? 0 : it->second;
}

void ClientInflight::Give(const std::string& client) {
  std::lock_guard lock(mu_);
  auto it = held_.find(client);
  if (it != held_.end() && --it->second == 0) held_.erase(it);
}

ClientInflight::Slot CurrentRequestSlot() {
  return current_slot != nullptr ? *current_slot : nullptr;
}

ScopedRequestSlot::ScopedRequestSlot(const ClientInflight::Slot& slot) : previous_(current_slot) {
  current_slot = &slot;
}

ScopedRequestSlot::~ScopedRequestSlot() { current_slot = previous_; }

}  // namespace kvtier
