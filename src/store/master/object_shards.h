// The key -> ObjectMeta map, split into kNumShards shards with a mutex each so RPC threads
// working on different keys rarely contend; each shard's map is an ObjectTable (object_table.h). A
// shard also keeps the set of its unfinished keys, so the sweep for abandoned puts visits only
// those, and the map-wide key count. Callers lock one shard (Lock / LockShard) and work on it
// through the returned guard; never hold two shard locks at once. Lock order elsewhere: shard ->
// segment pool.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "store/master/object_meta.h"
#include "store/master/object_table.h"

namespace kvtier::store {

class ObjectShard {
 public:
  // Valid until the key is erased (other keys' inserts and erases do not move it).
  ObjectMeta* Find(std::string_view key);
  // Inserts, or replaces the meta of a present key (callers Find first, under the same lock).
  ObjectMeta& Insert(std::string_view key, ObjectMeta meta);
  void Erase(std::string_view key);
  // Unfinished -> complete.
  void MarkComplete(std::string_view key, ObjectMeta& meta);

  // `key` is a buffer reused across calls: copy it to keep it.
  void ForEach(const std::function<void(const std::string& key, const ObjectMeta&)>& fn) const;
  // Calls `fn(key, meta)` for every object; erases those for which it returns true.
  // Returns how many were erased. fn must not insert into or erase from this shard itself.
  size_t EraseIf(const std::function<bool(const std::string& key, ObjectMeta&)>& fn);
  std::vector<std::string> UnfinishedKeys() const;
  size_t unfinished_count() const { return unfinished_.size(); }
  size_t size() const { return table_.size(); }
  // Bytes this shard holds from the allocator (object_table.h says what is counted).
  uint64_t MemoryBytes() const;

 private:
  friend class ObjectShards;
  mutable std::mutex mu_;
  ObjectTable table_;
  // The unfinished objects' entries, by their meta's address (what MarkComplete is given).
  std::unordered_map<const ObjectMeta*, ObjectTable::Index> unfinished_;
  std::atomic<int64_t>* keys_ = nullptr;  // ObjectShards::keys_
  std::atomic<int64_t>* unfinished_total_ = nullptr;
};

class ObjectShards {
 public:
  static constexpr size_t kNumShards = 256;

  // A locked shard; unlocks when destroyed.
  class Locked {
   public:
    ObjectShard* operator->() { return shard_; }
    ObjectShard& operator*() { return *shard_; }

   private:
    friend class ObjectShards;
    explicit Locked(ObjectShard* shard) : lock_(shard->mu_), shard_(shard) {}
    std::unique_lock<std::mutex> lock_;
    ObjectShard* shard_;
  };

  ObjectShards();
  ObjectShards(const ObjectShards&) = delete;
  ObjectShards& operator=(const ObjectShards&) = delete;

  static size_t ShardOf(const std::string& key);
  Locked Lock(const std::string& key) { return Locked(&shards_[ShardOf(key)]); }
  Locked LockShard(size_t index) { return Locked(&shards_[index]); }

  uint64_t keys() const { return static_cast<uint64_t>(keys_.load()); }
  uint64_t unfinished() const { return static_cast<uint64_t>(unfinished_.load()); }
  // Before looking up a batch of keys one by one: warms the cache lines each lookup will touch
  // (index slot, entry, key bytes) a stage at a time over the batch, so the memory waits of
  // different keys overlap instead of following each other. Each stage takes each key's shard
  // lock for a moment; nothing is read or changed that a Find would not.
  void Prefetch(const std::vector<std::string>& keys);
  // Every shard's MemoryBytes (locks each in turn).
  uint64_t MemoryBytes() const;

 private:
  std::array<ObjectShard, kNumShards> shards_;
  std::atomic<int64_t> keys_{0};
  std::atomic<int64_t> unfinished_{0};
};

}  // namespace kvtier::store
