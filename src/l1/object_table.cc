#include "l1/object_table.h"

#include <algorithm>
#include <cassert>
#include <limits>

namespace kvtier {

ObjectEntry* ObjectTable::Find(const ObjectKey& key) {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

const ObjectEntry* ObjectTable::Find(const ObjectKey& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second;
}

const ObjectEntry* ObjectTable::FindResident(const ObjectKey& key) const {
  const ObjectEntry* e = Find(key);
  return e != nullptr && e->state == ObjectState::kResident ? e : nullptr;
}

void ObjectTable::InsertStaging(const ObjectKey& key, uint64_t offset, uint64_t size,
                                uint64_t alloc_size, int64_t write_deadline_ns) {
  ObjectEntry entry;
  entry.offset = offset;
  entry.size = size;
  entry.alloc_size = alloc_size;
  entry.state = ObjectState::kStaging;
  entry.write_deadline_ns = write_deadline_ns;
  [[maybe_unused]] const bool inserted = entries_.emplace(key, entry).second;
  assert(inserted);
  staging_.insert(key);
  staging_bytes_ += alloc_size;
}

bool ObjectTable::Publish(const ObjectKey& key) {
  ObjectEntry* e = Find(key);
  if (e == nullptr || e->state != ObjectState::kStaging) return false;
  e->state = ObjectState::kResident;
  staging_.erase(key);
  staging_bytes_ -= e->alloc_size;
  resident_bytes_ += e->alloc_size;
  return true;
}

ObjectEntry ObjectTable::Erase(const ObjectKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return ObjectEntry{};
  ObjectEntry entry = it->second;
  entries_.erase(it);
  if (entry.state == ObjectState::kStaging) {
    staging_.erase(key);
    staging_bytes_ -= entry.alloc_size;
  } else {
    resident_bytes_ -= entry.alloc_size;
  }
  return entry;
}

void ObjectTable::AddReadLocks(ObjectEntry& entry, uint32_t count, int64_t now_ns, int64_t ttl_ns) {
  if (!entry.Pinned(now_ns)) entry.read_locks = 0;
  const uint32_t room = std::numeric_limits<uint32_t>::max() - entry.read_locks;
  entry.read_locks += std::min(count, room);
  entry.read_deadline_ns = now_ns + ttl_ns;
}

void ObjectTable::ReleaseReadLocks(ObjectEntry& entry, uint32_t count, int64_t now_ns) {
  if (!entry.Pinned(now_ns)) {
    entry.read_locks = 0;
    return;
  }
  entry.read_locks -= std::min(count, entry.read_locks);
}

std::vector<ObjectKey> ObjectTable::ExpiredStaging(int64_t now_ns) const {
  std::vector<ObjectKey> out;
  for (const ObjectKey& key : staging_) {
    if (entries_.at(key).WriteExpired(now_ns)) out.push_back(key);
  }
  return out;
}

std::vector<ObjectKey> ObjectTable::ResidentKeys() const {
  std::vector<ObjectKey> out;
  out.reserve(resident_objects());
  for (const auto& [key, entry] : entries_) {
    if (entry.state == ObjectState::kResident) out.push_back(key);
  }
  return out;
}

size_t ObjectTable::CountPinned(int64_t now_ns) const {
  size_t n = 0;
  for (const auto& [key, entry] : entries_) {
    if (entry.state == ObjectState::kResident && entry.Pinned(now_ns)) ++n;
  }
  return n;
}

}  // namespace kvtier
