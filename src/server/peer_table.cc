#include "server/peer_table.h"

namespace kvtier {
namespace {

bool ZmqMade(const std::string& id) { return id.size() == 5 && id[0] == '\0'; }

uint32_t Serial(const std::string& id) {
  uint32_t n = 0;
  for (size_t i = 1; i < 5; ++i) n = (n << 8) | static_cast<unsigned char>(id[i]);
  return n;
}

}  // namespace

bool MadeBefore(const std::string& a, const std::string& b) {
  if (!ZmqMade(a) || !ZmqMade(b)) return false;
  // Serial-number order, so the counter's wrap does not reverse it.
  return static_cast<int32_t>(Serial(b) - Serial(a)) > 0;
}

void PeerTable::Greet(const std::string& id, int fd, uint32_t version, std::string client) {
  if (fd >= 0) {
    auto [owner, fresh] = greeted_on_fd_.try_emplace(fd, id);
    if (!fresh && owner->second != id) {
      if (MadeBefore(id, owner->second)) return;  // stale: its connection closed already
      auto old = peers_.find(owner->second);
      // The old id may have moved to another fd since (a client that set its own id reconnects).
      if (old != peers_.end() && old->second.fd == fd) peers_.erase(old);
      owner->second = id;
    }
  }
  peers_[id] = Peer{version, std::move(client), fd};
}

const PeerTable::Peer* PeerTable::Find(const std::string& id) const {
  auto it = peers_.find(id);
  return it == peers_.end() ? nullptr : &it->second;
}

}  // namespace kvtier
