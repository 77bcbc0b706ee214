// The key -> ObjectMeta map, split into kNumShards shards with a mutex each so RPC threads
// working on different keys rarely contend. A shard also keeps the set of its unfinished keys,
// so the sweep for abandoned puts visits only those, and the map-wide key count.
// Callers lock one shard (Lock / LockShard) and work on it through the returned guard; never
// hold two shard locks at once. Lock order elsewhere: shard -> segment pool.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store/master/object_meta.h"

namespace kvtier::store {

class ObjectShard {
 public:
  ObjectMeta* Find(const std::string& key);
  // The key must be absent (callers Find first, under the same lock).
  ObjectMeta& Insert(const std::string& key, ObjectMeta meta);
  void Erase(const std::string& key);
  // Unfinished -> complete.
  void MarkComplete(const std::string& key, ObjectMeta& meta);

  void ForEach(const std::function<void(const std::string&, const ObjectMeta&)>& fn) const {
    for (const auto& [key, meta] : objects_) fn(key, meta);
  }
  // Calls `fn(key, meta)` for every object; erases those for which it returns true.
  // Returns how many were erased.
  size_t EraseIf(const std::function<bool(const std::string&, ObjectMeta&)>& fn);
  std::vector<std::string> UnfinishedKeys() const {
    return {unfinished_.begin(), unfinished_.end()};
  }
  size_t unfinished_count() const { return unfinished_.size(); }
  size_t size() const { return objects_.size(); }

 private:
  friend class ObjectShards;
  std::mutex mu_;
  std::unordered_map<std::string, ObjectMeta> objects_;
  std::unordered_set<std::string> unfinished_;
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

 private:
  std::array<ObjectShard, kNumShards> shards_;
  std::atomic<int64_t> keys_{0};
  std::atomic<int64_t> unfinished_{0};
};

}  // namespace kvtier::store
