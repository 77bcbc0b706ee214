// Sharded object map (see object_shards.h).
#include "store/master/object_shards.h"

#include <algorithm>

namespace kvtier::store {

ObjectMeta* ObjectShard::Find(std::string_view key) {
  const ObjectTable::Index i = table_.Find(key, ObjectTable::Hash(key));
  return i == ObjectTable::kNone ? nullptr : &table_.meta(i);
}

ObjectMeta& ObjectShard::Insert(std::string_view key, ObjectMeta meta) {
  const bool complete = meta.complete;
  const auto [i, inserted] = table_.Insert(key, ObjectTable::Hash(key), std::move(meta));
  if (inserted) keys_->fetch_add(1);
  ObjectMeta& stored = table_.meta(i);
  if (!complete && unfinished_.emplace(&stored, i).second) unfinished_total_->fetch_add(1);
  if (complete && unfinished_.erase(&stored) != 0) unfinished_total_->fetch_sub(1);
  return stored;
}

void ObjectShard::Erase(std::string_view key) {
  const uint64_t hash = ObjectTable::Hash(key);
  const ObjectTable::Index i = table_.Find(key, hash);
  if (i == ObjectTable::kNone) return;
  if (unfinished_.erase(&table_.meta(i)) != 0) unfinished_total_->fetch_sub(1);
  table_.EraseIndex(i, hash);
  keys_->fetch_sub(1);
}

void ObjectShard::MarkComplete(std::string_view, ObjectMeta& meta) {
  meta.complete = true;
  if (unfinished_.erase(&meta) != 0) unfinished_total_->fetch_sub(1);
}

void ObjectShard::ForEach(
    const std::function<void(const std::string&, const ObjectMeta&)>& fn) const {
  std::string key;
  table_.ForEachIndex([&](ObjectTable::Index i) {
    key.assign(table_.key(i));
    fn(key, table_.meta(i));
  });
}

size_t ObjectShard::EraseIf(const std::function<bool(const std::string&, ObjectMeta&)>& fn) {
  size_t erased = 0;
  std::string key;
  table_.ForEachIndex([&](ObjectTable::Index i) {
    key.assign(table_.key(i));
    ObjectMeta& meta = table_.meta(i);
    if (!fn(key, meta)) return;
    if (unfinished_.erase(&meta) != 0) unfinished_total_->fetch_sub(1);
    table_.EraseIndex(i, ObjectTable::Hash(key));
    keys_->fetch_sub(1);
    ++erased;
  });
  return erased;
}

std::vector<std::string> ObjectShard::UnfinishedKeys() const {
  std::vector<std::string> keys;
  keys.reserve(unfinished_.size());
  for (const auto& [meta, i] : unfinished_) keys.emplace_back(table_.key(i));
  return keys;
}

uint64_t ObjectShard::MemoryBytes() const {
  // An unordered_map node is about its value plus two pointers.
  return table_.MemoryBytes() + unfinished_.bucket_count() * sizeof(void*) +
         unfinished_.size() * (sizeof(std::pair<const ObjectMeta*, ObjectTable::Index>) + 16);
}

ObjectShards::ObjectShards() {
  for (ObjectShard& s : shards_) {
    s.keys_ = &keys_;
    s.unfinished_total_ = &unfinished_;
  }
}

size_t ObjectShards::ShardOf(const std::string& key) { return ObjectTable::Hash(key) % kNumShards; }

void ObjectShards::Prefetch(const std::vector<std::string>& keys) {
  constexpr size_t kGroup = 64;  // keys in flight at once
  uint64_t hash[kGroup];
  ObjectTable::Index index[kGroup];
  for (size_t base = 0; base < keys.size(); base += kGroup) {
    const size_t n = std::min(kGroup, keys.size() - base);
    for (size_t i = 0; i < n; ++i) {
      hash[i] = ObjectTable::Hash(keys[base + i]);
      ObjectShard& shard = shards_[hash[i] % kNumShards];
      std::lock_guard lock(shard.mu_);
      shard.table_.PrefetchSlot(hash[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      ObjectShard& shard = shards_[hash[i] % kNumShards];
      std::lock_guard lock(shard.mu_);
      index[i] = shard.table_.PrefetchEntry(hash[i]);
    }
    for (size_t i = 0; i < n; ++i) {
      if (index[i] == ObjectTable::kNone) continue;
      ObjectShard& shard = shards_[hash[i] % kNumShards];
      std::lock_guard lock(shard.mu_);
      shard.table_.PrefetchKey(index[i]);
    }
  }
}

uint64_t ObjectShards::MemoryBytes() const {
  uint64_t bytes = 0;
  for (const ObjectShard& shard : shards_) {
    std::lock_guard lock(shard.mu_);
    bytes += shard.MemoryBytes();
  }
  return bytes;
}

}  // namespace kvtier::store
