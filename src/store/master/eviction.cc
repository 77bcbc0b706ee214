// Victim choice and the eviction pass (see eviction.h).
#include "store/master/eviction.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "store/master/leases.h"

namespace kvtier::store {

std::optional<EvictionCutoff> ChooseCutoff(std::vector<LeaseBytes> candidates,
                                           uint64_t bytes_needed) {
  if (candidates.empty() || bytes_needed == 0) return std::nullopt;
  // A min-heap on the lease: popping the oldest leases until the goal is met costs
  // O(n + k log n) for k victims, instead of sorting every candidate.
  auto later = [](const LeaseBytes& a, const LeaseBytes& b) {
    return a.lease_until_ns > b.lease_until_ns;
  };
  std::make_heap(candidates.begin(), candidates.end(), later);
  uint64_t below = 0;  // bytes of popped candidates with a lease strictly before the current one
  uint64_t at = 0;     // bytes of popped candidates with exactly the current lease
  int64_t current = candidates.front().lease_until_ns;
  while (!candidates.empty() && below + at < bytes_needed) {
    std::pop_heap(candidates.begin(), candidates.end(), later);
    const LeaseBytes next = candidates.back();
    candidates.pop_back();
    if (next.lease_until_ns != current) {
      below += at;
      at = 0;
      current = next.lease_until_ns;
    }
    at += next.bytes;
  }
  if (below + at < bytes_needed) {  // not enough: everything goes
    return EvictionCutoff{current, std::numeric_limits<uint64_t>::max()};
  }
  return EvictionCutoff{current, bytes_needed - below};
}

uint64_t BytesOverWatermark(uint64_t allocated, uint64_t capacity, double high_watermark,
                            double eviction_ratio) {
  if (capacity == 0) return 0;
  const double cap = static_cast<double>(capacity);
  if (static_cast<double>(allocated) <= high_watermark * cap) return 0;
  // Rounded to the nearest byte: (0.95 - 0.05) x 1000 is 899.999... in doubles.
  const double target = std::round(std::max(0.0, (high_watermark - eviction_ratio) * cap));
  const double over = static_cast<double>(allocated) - target;
  return over <= 0 ? 0 : static_cast<uint64_t>(over);
}

EvictionResult Evictor::Evict(uint64_t bytes_needed, int64_t now_ns) {
  if (bytes_needed == 0) return {};
  std::lock_guard pass(mu_);
  const EvictionResult result = EvictLocked(bytes_needed, now_ns);
  passes_.fetch_add(1);
  return result;
}

EvictionResult Evictor::EvictIfNoPassSince(uint64_t passes_seen, uint64_t bytes_needed,
                                           int64_t now_ns) {
  if (bytes_needed == 0) return {};
  std::lock_guard pass(mu_);
  if (passes_.load() != passes_seen) return EvictionResult{0, 0, /*skipped=*/true};
  const EvictionResult result = EvictLocked(bytes_needed, now_ns);
  passes_.fetch_add(1);
  return result;
}

EvictionResult Evictor::EvictLocked(uint64_t bytes_needed, int64_t now_ns) {
  EvictionResult result;
  auto evictable = [this, now_ns](const ObjectMeta& m) {
    return m.complete && !m.hard_pin && !LeaseLive(m.lease_until_ns, now_ns) &&
           (evict_soft_pinned_ || !m.SoftPinned(now_ns));
  };

  // One collection for both kinds: the unpinned candidates meet the goal first, the soft-pinned
  // ones ([1]) only what the unpinned ones cannot.
  std::vector<LeaseBytes> candidates[2];
  uint64_t unpinned_bytes = 0;
  for (size_t i = 0; i < ObjectShards::kNumShards; ++i) {
    auto shard = shards_->LockShard(i);
    shard->ForEach([&](const std::string&, const ObjectMeta& m) {
      if (!evictable(m)) return;
      const bool soft = m.SoftPinned(now_ns);
      candidates[soft].push_back(LeaseBytes{m.lease_until_ns, m.ChargedTotal()});
      if (!soft) unpinned_bytes += m.ChargedTotal();
    });
  }
  const std::optional<EvictionCutoff> cutoffs[2] = {
      ChooseCutoff(std::move(candidates[0]), bytes_needed),
      bytes_needed > unpinned_bytes
          ? ChooseCutoff(std::move(candidates[1]), bytes_needed - unpinned_bytes)
          : std::nullopt};
  if (!cutoffs[0] && !cutoffs[1]) return result;

  uint64_t at_cutoff[2] = {0, 0};
  for (size_t i = 0; i < ObjectShards::kNumShards; ++i) {
    auto shard = shards_->LockShard(i);
    shard->EraseIf([&](const std::string& key, ObjectMeta& m) {
      if (!evictable(m)) return false;
      const bool soft = m.SoftPinned(now_ns);
      const std::optional<EvictionCutoff>& cutoff = cutoffs[soft];
      if (!cutoff || m.lease_until_ns > cutoff->lease_until_ns) return false;
      if (m.lease_until_ns == cutoff->lease_until_ns) {
        if (at_cutoff[soft] >= cutoff->bytes_at_cutoff) return false;
        at_cutoff[soft] += m.ChargedTotal();
      }
      result.objects += 1;
      result.bytes += m.ChargedTotal();
      if (release_) {
        release_(key, m);
      } else {
        pool_->FreeAll(m.replicas);
      }
      return true;
    });
  }
  return result;
}

}  // namespace kvtier::store
