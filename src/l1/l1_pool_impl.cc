#include "l1/l1_pool_impl.h"

#include <chrono>
#include <string>
#include <unordered_set>
#include <utility>

namespace kvtier {
namespace {

int64_t ToNs(std::chrono::milliseconds d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

// Identity of the keys of one batch without copying them (duplicate detection).
struct KeyPtrHash {
  size_t operator()(const ObjectKey* k) const { return ObjectKeyHash{}(*k); }
};
struct KeyPtrEq {
  bool operator()(const ObjectKey* a, const ObjectKey* b) const { return *a == *b; }
};

}  // namespace

L1PoolImpl::L1PoolImpl(const L1Options& options, MappedFile arena,
                       std::unique_ptr<EvictionPolicy> policy)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      arena_(std::move(arena)),
      policy_(std::move(policy)),
      read_ttl_ns_(ToNs(options.read_lock_ttl)),
      write_ttl_ns_(ToNs(options.write_lock_ttl)),
      allocator_(options.capacity_bytes, options.alignment),
      trigger_bytes_(static_cast<uint64_t>(options.trigger_watermark *
                                           static_cast<double>(allocator_.capacity()))),
      target_bytes_(static_cast<uint64_t>(options.target_watermark *
                                          static_cast<double>(allocator_.capacity()))) {
  if (MetricsRegistry* m = options.metrics; m != nullptr) {
    metrics_.used_bytes =
        m->GetGauge("kvtier_l1_used_bytes", "L1 bytes held by resident and staging objects");
    metrics_.capacity_bytes = m->GetGauge("kvtier_l1_capacity_bytes", "L1 usable arena bytes");
    metrics_.objects = m->GetGauge("kvtier_l1_objects", "Resident L1 objects");
    metrics_.evictions = m->GetCounter("kvtier_l1_evictions_total", "L1 objects evicted");
    metrics_.evicted_bytes =
        m->GetCounter("kvtier_l1_evicted_bytes_total", "L1 bytes freed by eviction");
    metrics_.alloc_failures =
        m->GetCounter("kvtier_l1_alloc_failures_total", "L1 reservations refused for lack of room");
    metrics_.capacity_bytes->Set(static_cast<double>(allocator_.capacity()));
    UpdateGauges();
  }
}

Result<std::vector<WriteSlot>> L1PoolImpl::ReserveWrite(std::span<const ObjectKey> keys,
                                                        uint64_t object_size) {
  if (object_size == 0) return Status(Code::kInvalidArgument, "L1 object size must be > 0");
  std::vector<WriteSlot> slots(keys.size());
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowNs();

  // Which slots need a new object: not resident, not being written, first in this batch.
  std::vector<size_t> todo;
  std::unordered_set<const ObjectKey*, KeyPtrHash, KeyPtrEq> seen;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!seen.insert(&keys[i]).second) continue;
    if (const ObjectEntry* e = table_.Find(keys[i]); e != nullptr) {
      if (!e->WriteExpired(now)) continue;
      FreeObject(keys[i]);  // the lapsed writer's reservation passes to this one
    }
    todo.push_back(i);
  }
  if (todo.empty()) return slots;

  const uint64_t aligned = allocator_.AlignedSize(object_size);
  const uint64_t capacity = allocator_.capacity();
  const bool can_ever_fit = aligned <= capacity && todo.size() <= capacity / aligned;
  const uint64_t needed = can_ever_fit ? todo.size() * aligned : 0;

  std::vector<uint64_t> offsets;
  if (can_ever_fit) {
    offsets.reserve(todo.size());
    if (needed > allocator_.free_bytes()) {
      ReclaimExpiredStaging(now);
      // Evict only when eviction alone could make room; pinned objects may still defeat it.
      const uint64_t free = allocator_.free_bytes();
      if (needed > free && needed - free <= table_.resident_bytes()) {
        EvictBytes(needed - free, now);
      }
    }
    while (offsets.size() < todo.size()) {
      if (auto off = allocator_.Allocate(object_size)) {
        offsets.push_back(*off);
        continue;
      }
      // Short of bytes, or enough bytes in pieces too small: give up one more object per try.
      if (allocator_.free_bytes() + table_.resident_bytes() < needed - offsets.size() * aligned ||
          EvictBytes(aligned, now) == 0) {
        break;
      }
    }
  }

  if (!can_ever_fit || offsets.size() < todo.size()) {
    for (uint64_t off : offsets) allocator_.Free(off, object_size);
    ++alloc_failures_;
    if (metrics_.alloc_failures != nullptr) metrics_.alloc_failures->Inc();
    UpdateGauges();
    return Status(Code::kOutOfMemory,
                  "L1 full: requested " + std::to_string(todo.size()) + " x " +
                      std::to_string(aligned) + " bytes, " +
                      std::to_string(allocator_.free_bytes()) + " of " + std::to_string(capacity) +
                      " bytes free (" + std::to_string(table_.staging_bytes()) +
                      " staging, the rest resident; pinned objects are not evicted)");
  }

  const int64_t write_deadline = now + write_ttl_ns_;
  for (size_t j = 0; j < todo.size(); ++j) {
    const size_t i = todo[j];
    table_.InsertStaging(keys[i], offsets[j], object_size, aligned, write_deadline);
    slots[i] = WriteSlot{arena_.data() + offsets[j], object_size};
  }
  EvictToTarget(now);
  UpdateGauges();
  return slots;
}

void L1PoolImpl::FinishWrite(std::span<const ObjectKey> keys, uint32_t pin_count) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowNs();
  for (const ObjectKey& key : keys) {
    if (!table_.Publish(key)) continue;
    policy_->OnInsert(key);
    if (pin_count > 0) ObjectTable::AddReadLocks(*table_.Find(key), pin_count, now, read_ttl_ns_);
  }
  EvictToTarget(now);
  UpdateGauges();
}

void L1PoolImpl::AbortWrite(std::span<const ObjectKey> keys) {
  std::lock_guard lock(mu_);
  for (const ObjectKey& key : keys) {
    const ObjectEntry* e = table_.Find(key);
    if (e != nullptr && e->state == ObjectState::kStaging) FreeObject(key);
  }
  UpdateGauges();
}

std::vector<ReadPin> L1PoolImpl::Pin(std::span<const ObjectKey> keys, uint32_t count) {
  std::vector<ReadPin> pins(keys.size());
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowNs();
  for (size_t i = 0; i < keys.size(); ++i) {
    ObjectEntry* e = table_.Find(keys[i]);
    if (e == nullptr || e->state != ObjectState::kResident) continue;
    ObjectTable::AddReadLocks(*e, count, now, read_ttl_ns_);
    policy_->OnAccess(keys[i]);
    pins[i] = ReadPin{arena_.data() + e->offset, e->size};
  }
  return pins;
}

void L1PoolImpl::Unpin(std::span<const ObjectKey> keys, uint32_t count) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowNs();
  for (const ObjectKey& key : keys) {
    ObjectEntry* e = table_.Find(key);
    if (e != nullptr && e->state == ObjectState::kResident) {
      ObjectTable::ReleaseReadLocks(*e, count, now);
    }
  }
}

size_t L1PoolImpl::CountPrefix(std::span<const ObjectKey> keys) const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  while (n < keys.size() && table_.FindResident(keys[n]) != nullptr) ++n;
  return n;
}

bool L1PoolImpl::Contains(const ObjectKey& key) const {
  std::lock_guard lock(mu_);
  return table_.FindResident(key) != nullptr;
}

void L1PoolImpl::Touch(std::span<const ObjectKey> keys) {
  std::lock_guard lock(mu_);
  for (const ObjectKey& key : keys) {
    if (table_.FindResident(key) != nullptr) policy_->OnAccess(key);
  }
}

size_t L1PoolImpl::Clear(std::string_view key_prefix) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowNs();
  size_t removed = 0;
  for (const ObjectKey& key : table_.ResidentKeys()) {
    if (table_.Find(key)->Pinned(now)) continue;
    if (!key_prefix.empty() && !key.ToString().starts_with(key_prefix)) continue;
    FreeObject(key);
    ++removed;
  }
  UpdateGauges();
  return removed;
}

size_t L1PoolImpl::Erase(std::span<const ObjectKey> keys) {
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowNs();
  size_t removed = 0;
  for (const ObjectKey& key : keys) {
    const ObjectEntry* e = table_.FindResident(key);
    if (e == nullptr || e->Pinned(now)) continue;
    FreeObject(key);
    ++removed;
  }
  UpdateGauges();
  return removed;
}

size_t L1PoolImpl::EvictIfNeeded() {
  std::lock_guard lock(mu_);
  const int64_t now = clock_->NowNs();
  const size_t n = ReclaimExpiredStaging(now) + EvictToTarget(now);
  UpdateGauges();
  return n;
}

L1Stats L1PoolImpl::Stats() const {
  std::lock_guard lock(mu_);
  L1Stats s;
  s.capacity_bytes = allocator_.capacity();
  s.used_bytes = allocator_.used_bytes();
  s.staging_bytes = table_.staging_bytes();
  s.objects = table_.resident_objects();
  s.pinned_objects = table_.CountPinned(clock_->NowNs());
  s.evictions = evictions_;
  s.evicted_bytes = evicted_bytes_;
  s.alloc_failures = alloc_failures_;
  return s;
}

void L1PoolImpl::FreeObject(const ObjectKey& key) {
  const ObjectEntry e = table_.Erase(key);
  if (e.alloc_size == 0) return;
  allocator_.Free(e.offset, e.size);
  if (e.state == ObjectState::kResident) policy_->OnRemove(key);
}

size_t L1PoolImpl::ReclaimExpiredStaging(int64_t now_ns) {
  const std::vector<ObjectKey> expired = table_.ExpiredStaging(now_ns);
  for (const ObjectKey& key : expired) FreeObject(key);
  return expired.size();
}

size_t L1PoolImpl::EvictBytes(uint64_t bytes, int64_t now_ns) {
  if (bytes == 0) return 0;
  // Collect first: the policy must not change while it is being walked.
  std::vector<ObjectKey> victims;
  uint64_t planned = 0;
  policy_->ForEachCandidate([&](const ObjectKey& key) {
    const ObjectEntry* e = table_.FindResident(key);
    if (e == nullptr || e->Pinned(now_ns)) return false;  // skip it, keep walking
    victims.push_back(key);
    planned += e->alloc_size;
    return planned >= bytes;
  });
  for (const ObjectKey& key : victims) FreeObject(key);
  evictions_ += victims.size();
  evicted_bytes_ += planned;
  if (metrics_.evictions != nullptr && !victims.empty()) {
    metrics_.evictions->Inc(static_cast<double>(victims.size()));
    metrics_.evicted_bytes->Inc(static_cast<double>(planned));
  }
  return victims.size();
}

size_t L1PoolImpl::EvictToTarget(int64_t now_ns) {
  const uint64_t used = allocator_.used_bytes();
  if (used < trigger_bytes_ || used <= target_bytes_) return 0;
  return EvictBytes(used - target_bytes_, now_ns);
}

void L1PoolImpl::UpdateGauges() {
  if (metrics_.used_bytes == nullptr) return;
  metrics_.used_bytes->Set(static_cast<double>(allocator_.used_bytes()));
  metrics_.objects->Set(static_cast<double>(table_.resident_objects()));
}

}  // namespace kvtier
