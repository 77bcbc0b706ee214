// The order in which the L1 pool gives up resident objects. A policy only ranks keys: it never
// frees memory and knows nothing of sizes or locks. The pool tells it about every resident
// object (OnInsert when published, OnAccess on Touch/Pin, OnRemove when it leaves for any
// reason) and, to evict, walks ForEachCandidate and skips the keys it may not evict (pinned).
// Not thread-safe: the pool serialises calls under its own mutex.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "common/object_key.h"
#include "common/status.h"

namespace kvtier {

class EvictionPolicy {
 public:
  virtual ~EvictionPolicy() = default;

  virtual std::string_view Name() const = 0;

  virtual void OnInsert(const ObjectKey& key) = 0;
  virtual void OnAccess(const ObjectKey& key) = 0;
  virtual void OnRemove(const ObjectKey& key) = 0;

  // Offers each tracked key at most once, best victim first, until `visit` returns true (stop).
  // Returns true when `visit` stopped the walk, false when the candidates ran out. The caller
  // must not call the other methods during the walk; it collects victims and removes them
  // afterwards. Non-const because a policy may reorder its queues while choosing (S3-FIFO).
  virtual bool ForEachCandidate(const std::function<bool(const ObjectKey&)>& visit) = 0;

  // Number of keys tracked.
  virtual size_t Size() const = 0;
};

// "LRU", "S3FIFO" or "noop" (any case). Anything else is INVALID_ARGUMENT naming the valid ones.
Result<std::unique_ptr<EvictionPolicy>> MakeEvictionPolicy(std::string_view name);

}  // namespace kvtier
