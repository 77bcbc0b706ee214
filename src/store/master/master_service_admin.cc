// MasterService, part 3: the operators' reads behind the master's HTTP API. They take one shard
// lock at a time (never two) and grant no lease, so looking at a key never pins it.
#include "store/master/master_service.h"
#include "store/master/master_service_impl.h"

namespace kvtier::store {

std::vector<std::string> MasterService::CompleteKeys(size_t limit) const {
  Impl& s = *impl_;
  std::vector<std::string> keys;
  for (size_t i = 0; i < ObjectShards::kNumShards && keys.size() < limit; ++i) {
    auto shard = s.shards.LockShard(i);
    shard->ForEach([&](const std::string& key, const ObjectMeta& meta) {
      if (meta.complete && keys.size() < limit) keys.push_back(key);
    });
  }
  return keys;
}

Result<ObjectDesc> MasterService::Describe(const std::string& key) const {
  Impl& s = *impl_;
  if (Status bad = CheckKey(key); !bad.ok()) return bad;
  auto shard = s.shards.Lock(key);
  const ObjectMeta* meta = shard->Find(key);
  if (meta == nullptr || !meta->complete) {
    return StoreError(ErrorCode::OBJECT_NOT_FOUND, "key " + KeyForMessage(key) + " not found");
  }
  ObjectDesc desc;
  desc.size = meta->size;
  for (const Replica& r : meta->replicas) desc.replicas.push_back(r.Desc(s.term));
  return desc;
}

std::vector<SegmentSnapshot> MasterService::Segments() const { return impl_->pool.Snapshot(); }

}  // namespace kvtier::store
