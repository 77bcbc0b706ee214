// The L1 pool: one memfd arena carved into aligned objects, an object table with a write lock
// (staging objects are invisible to readers) and counted read locks ("pins") that expire after
// a TTL, and eviction by bytes: when used bytes reach trigger * capacity, unlocked objects are
// evicted in policy order until used <= target * capacity. Reservation is all-or-nothing and
// never blocks: when there is no room the whole batch fails with OUT_OF_MEMORY and is counted.
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "common/object_key.h"
#include "common/status.h"

namespace kvtier {

struct L1Options {
  uint64_t capacity_bytes = 1ULL << 30;  // rounded down to a multiple of the alignment
  uint64_t alignment = 4096;             // power of two; object offsets and sizes round to it
  double trigger_watermark = 0.8;        // eviction starts when used >= trigger * capacity
  double target_watermark = 0.7;         // ... and stops when used <= target * capacity
  std::string policy = "LRU";            // "LRU" | "S3FIFO" | "noop" (any case)
  bool prefault = true;
  bool huge_pages = true;
  std::chrono::milliseconds read_lock_ttl{300'000};
  std::chrono::milliseconds write_lock_ttl{600'000};
  Clock* clock = nullptr;              // nullptr = Clock::Real()
  MetricsRegistry* metrics = nullptr;  // nullptr = no metrics
};

struct WriteSlot {
  uint8_t* data = nullptr;  // nullptr when the key was skipped (already resident or staging)
  uint64_t size = 0;
};

struct ReadPin {
  const uint8_t* data = nullptr;  // nullptr when the key is not resident
  uint64_t size = 0;
};

struct L1Stats {
  uint64_t capacity_bytes = 0;
  uint64_t used_bytes = 0;  // resident + staging, rounded to alignment
  uint64_t staging_bytes = 0;
  uint64_t objects = 0;         // resident objects
  uint64_t pinned_objects = 0;  // resident objects with a live read lock
  uint64_t evictions = 0;       // objects evicted since start
  uint64_t evicted_bytes = 0;
  uint64_t alloc_failures = 0;  // ReserveWrite calls that failed for lack of room
};

class L1Pool {
 public:
  virtual ~L1Pool() = default;

  // Validates options (watermarks in (0,1], target <= trigger, known policy, capacity >=
  // alignment > 0, alignment a power of two, TTLs > 0) and creates the arena. Bad options are
  // INVALID_ARGUMENT with a message naming the field.
  static Result<std::unique_ptr<L1Pool>> Create(const L1Options& options);

  // Reserves one staging object of `object_size` bytes per key, all or nothing. A key that is
  // already resident or being written gets a WriteSlot with data == nullptr (not an error).
  // No room: unpinned resident objects are evicted in policy order until the batch fits; if it
  // still does not (pinned/staging objects, or the noop policy), OUT_OF_MEMORY, nothing is
  // reserved and alloc_failures is counted. object_size == 0 is INVALID_ARGUMENT. A staging
  // object whose write lock expired is handed to the new writer.
  virtual Result<std::vector<WriteSlot>> ReserveWrite(std::span<const ObjectKey> keys,
                                                      uint64_t object_size) = 0;
  // Publishes the reserved keys: they become readable. Pass only the keys whose slot had
  // data != nullptr: writes carry no owner token, so a skipped key that another writer is
  // staging would be published (or, for AbortWrite, dropped) on that writer's behalf.
  // Keys that are not staging are ignored. With pin_count > 0 each published key also gets that
  // many read locks in the same step, so eviction cannot take it in between (prefetch uses this).
  virtual void FinishWrite(std::span<const ObjectKey> keys, uint32_t pin_count = 0) = 0;
  // Drops staging objects without publishing them (same rule for which keys to pass).
  virtual void AbortWrite(std::span<const ObjectKey> keys) = 0;

  // Takes `count` read locks on each resident key (TTL = read_lock_ttl from now; every Pin
  // extends the deadline of all the key's locks; past it the count reads as 0). A key that is
  // not resident gets a ReadPin with data == nullptr. Pinned objects are never evicted or
  // cleared, and their bytes stay valid until the locks are released or expire. Counts as a
  // use for the eviction policy.
  virtual std::vector<ReadPin> Pin(std::span<const ObjectKey> keys, uint32_t count = 1) = 0;
  // Releases up to `count` read locks per key; releasing more than held (or expired) is a no-op.
  // Pass only keys whose ReadPin had data != nullptr: locks are counted, not owned, so
  // unpinning a key you did not pin releases someone else's lock.
  virtual void Unpin(std::span<const ObjectKey> keys, uint32_t count = 1) = 0;

  // Number of leading keys that are resident (no locks taken).
  virtual size_t CountPrefix(std::span<const ObjectKey> keys) const = 0;
  virtual bool Contains(const ObjectKey& key) const = 0;
  // Marks keys as recently used for the eviction policy.
  virtual void Touch(std::span<const ObjectKey> keys) = 0;
  // Removes every resident object that is not pinned and whose key string (ObjectKey::ToString)
  // starts with `key_prefix` (all of them for ""); returns how many were removed.
  virtual size_t Clear(std::string_view key_prefix = {}) = 0;
  // Removes the given keys where they are resident and not pinned; returns how many.
  virtual size_t Erase(std::span<const ObjectKey> keys) = 0;
  // Runs eviction now (also done automatically after FinishWrite/ReserveWrite) and reclaims
  // staging objects whose write lock expired; returns the number of objects removed by both
  // (only evictions count in Stats().evictions).
  virtual size_t EvictIfNeeded() = 0;

  virtual L1Stats Stats() const = 0;
  virtual uint8_t* ArenaBase() const = 0;
  virtual int ArenaFd() const = 0;
  virtual uint64_t ArenaSize() const = 0;
};

}  // namespace kvtier
