// The L1 object table: where each key lives in the arena and who holds it.
// - STAGING: reserved by a writer, write-locked until the writer publishes or aborts, invisible
//   to readers. The write lock has a deadline; past it the object is reclaimable, so a crashed
//   writer does not leak arena space.
// - RESIDENT: readable. Readers take counted read locks (pins). The count shares one deadline,
//   extended by every new pin; past the deadline the count reads as 0, so a crashed reader
//   cannot pin memory forever.
// Times are Clock::NowNs() values. Not thread-safe: the pool serialises calls.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/object_key.h"

namespace kvtier {

enum class ObjectState : uint8_t { kStaging, kResident };

struct ObjectEntry {
  uint64_t offset = 0;      // into the arena
  uint64_t size = 0;        // bytes the writer asked for (what readers see)
  uint64_t alloc_size = 0;  // size rounded to the arena alignment (what it costs)
  ObjectState state = ObjectState::kStaging;
  int64_t write_deadline_ns = 0;  // staging only
  uint32_t read_locks = 0;
  int64_t read_deadline_ns = 0;

  bool Pinned(int64_t now_ns) const { return read_locks > 0 && now_ns < read_deadline_ns; }
  bool WriteExpired(int64_t now_ns) const {
    return state == ObjectState::kStaging && now_ns >= write_deadline_ns;
  }
};

class ObjectTable {
 public:
  ObjectEntry* Find(const ObjectKey& key);
  const ObjectEntry* Find(const ObjectKey& key) const;
  // Resident entry or nullptr (staging objects do not exist for readers).
  const ObjectEntry* FindResident(const ObjectKey& key) const;

  // The key must be absent.
  void InsertStaging(const ObjectKey& key, uint64_t offset, uint64_t size, uint64_t alloc_size,
                     int64_t write_deadline_ns);
  // STAGING -> RESIDENT; false when the key is not staging.
  bool Publish(const ObjectKey& key);
  // Removes the key in either state; returns the removed entry (size 0 when absent).
  ObjectEntry Erase(const ObjectKey& key);

  // Adds `count` read locks (an expired count restarts from 0) and moves the deadline to
  // now + ttl.
  static void AddReadLocks(ObjectEntry& entry, uint32_t count, int64_t now_ns, int64_t ttl_ns);
  // Drops up to `count` live read locks.
  static void ReleaseReadLocks(ObjectEntry& entry, uint32_t count, int64_t now_ns);

  std::vector<ObjectKey> ExpiredStaging(int64_t now_ns) const;
  // Resident keys, in no particular order.
  std::vector<ObjectKey> ResidentKeys() const;
  size_t CountPinned(int64_t now_ns) const;

  size_t resident_objects() const { return entries_.size() - staging_.size(); }
  size_t staging_objects() const { return staging_.size(); }
  uint64_t resident_bytes() const { return resident_bytes_; }  // alloc sizes
  uint64_t staging_bytes() const { return staging_bytes_; }    // alloc sizes

 private:
  std::unordered_map<ObjectKey, ObjectEntry, ObjectKeyHash> entries_;
  // Staging keys, so reclaiming expired writes does not scan every resident object.
  std::unordered_set<ObjectKey, ObjectKeyHash> staging_;
  uint64_t resident_bytes_ = 0;
  uint64_t staging_bytes_ = 0;
};

}  // namespace kvtier
