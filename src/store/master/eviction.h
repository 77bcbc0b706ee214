// Eviction: frees segment space by erasing complete objects whose read lease has expired,
// oldest lease first (PutEnd sets the lease to "now" and every GetReplicas extends it, so this
// approximates LRU). Leased, unfinished and hard-pinned objects are never evicted; objects under
// a live soft pin (object_meta.h: it lapses soft_pin_ttl after the put or the last read) only for
// what the unpinned candidates cannot free (each kind gets its own cut-off, from the same two
// steps below), or never when the master is told not to. Goals are in BYTES of
// segment space (Mooncake counts objects), because KV objects vary in size and the watermark
// is about space.
//
// A pass has two steps, neither holding more than one shard lock:
//  1. collect (lease_until, bytes) of every candidate and choose a cut-off lease time so that
//     the candidates at or before it add up to the goal (ChooseCutoff, a pure function);
//  2. visit every shard and erase the candidates before the cut-off, plus those exactly at it
//     until the goal is met. Each object is re-checked under its shard lock, so a lease granted
//     between the steps protects it.
// Thread-safety: Evict and EvictIfNoPassSince may be called concurrently; passes are serialised
// by the evictor's own mutex, passes() is an atomic.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "store/master/object_shards.h"
#include "store/master/segment_pool.h"

namespace kvtier::store {

struct LeaseBytes {
  int64_t lease_until_ns = 0;
  uint64_t bytes = 0;
};

struct EvictionCutoff {
  int64_t lease_until_ns = 0;    // evict every candidate whose lease ended before this ...
  uint64_t bytes_at_cutoff = 0;  // ... and this many bytes of those whose lease ended at it
};

// nullopt when nothing should go (no candidates, or bytes_needed is 0). When the candidates do
// not add up to the goal, the cut-off takes them all.
std::optional<EvictionCutoff> ChooseCutoff(std::vector<LeaseBytes> candidates,
                                           uint64_t bytes_needed);

// Bytes to free so that `allocated` drops to (high_watermark - eviction_ratio) x capacity,
// or 0 while allocated <= high_watermark x capacity.
uint64_t BytesOverWatermark(uint64_t allocated, uint64_t capacity, double high_watermark,
                            double eviction_ratio);

struct EvictionResult {
  uint64_t objects = 0;
  uint64_t bytes = 0;
  bool skipped = false;  // EvictIfNoPassSince: another pass ran since, nothing was done
};

class Evictor {
 public:
  // `evict_soft_pinned` false: objects under a live soft pin are never candidates.
  Evictor(ObjectShards* shards, SegmentPool* pool, bool evict_soft_pinned = true)
      : shards_(shards), pool_(pool), evict_soft_pinned_(evict_soft_pinned) {}

  // One pass (passes are serialised). Frees at least `bytes_needed` when enough unleased
  // complete objects exist, otherwise all of them.
  EvictionResult Evict(uint64_t bytes_needed, int64_t now_ns);
  // For a put that found no room: evicts unless a pass has finished since the caller read
  // passes() (before it tried to allocate), because that pass may have made the room. Without
  // this, puts failing together would each evict their own share.
  EvictionResult EvictIfNoPassSince(uint64_t passes_seen, uint64_t bytes_needed, int64_t now_ns);
  // Passes finished so far.
  uint64_t passes() const { return passes_.load(); }
  // What happens to an evicted object's replicas (under its shard lock); by default they are
  // freed at once. Set before the first pass.
  using Release = std::function<void(const std::string& key, ObjectMeta& meta)>;
  void SetRelease(Release release) { release_ = std::move(release); }

 private:
  EvictionResult EvictLocked(uint64_t bytes_needed, int64_t now_ns);

  ObjectShards* shards_;
  SegmentPool* pool_;
  const bool evict_soft_pinned_;
  Release release_;
  std::mutex mu_;
  std::atomic<uint64_t> passes_{0};
};

}  // namespace kvtier::store
