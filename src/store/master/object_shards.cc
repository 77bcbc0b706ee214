// Sharded object map (see object_shards.h).
#include "store/master/object_shards.h"

namespace kvtier::store {

ObjectMeta* ObjectShard::Find(const std::string& key) {
  auto it = objects_.find(key);
  return it == objects_.end() ? nullptr : &it->second;
}

ObjectMeta& ObjectShard::Insert(const std::string& key, ObjectMeta meta) {
  const bool complete = meta.complete;
  auto [it, inserted] = objects_.insert_or_assign(key, std::move(meta));
  if (inserted) keys_->fetch_add(1);
  if (!complete && unfinished_.insert(key).second) unfinished_total_->fetch_add(1);
  if (complete && unfinished_.erase(key) != 0) unfinished_total_->fetch_sub(1);
  return it->second;
}

void ObjectShard::Erase(const std::string& key) {
  if (objects_.erase(key) != 0) keys_->fetch_sub(1);
  if (unfinished_.erase(key) != 0) unfinished_total_->fetch_sub(1);
}

void ObjectShard::MarkComplete(const std::string& key, ObjectMeta& meta) {
  meta.complete = true;
  if (unfinished_.erase(key) != 0) unfinished_total_->fetch_sub(1);
}

size_t ObjectShard::EraseIf(const std::function<bool(const std::string&, ObjectMeta&)>& fn) {
  size_t erased = 0;
  for (auto it = objects_.begin(); it != objects_.end();) {
    if (fn(it->first, it->second)) {
      if (unfinished_.erase(it->first) != 0) unfinished_total_->fetch_sub(1);
      it = objects_.erase(it);
      keys_->fetch_sub(1);
      ++erased;
    } else {
      ++it;
    }
  }
  return erased;
}

ObjectShards::ObjectShards() {
  for (ObjectShard& s : shards_) {
    s.keys_ = &keys_;
    s.unfinished_total_ = &unfinished_;
  }
}

size_t ObjectShards::ShardOf(const std::string& key) {
  return std::hash<std::string>{}(key) % kNumShards;
}

}  // namespace kvtier::store
