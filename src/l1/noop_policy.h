// A policy that never evicts: for buffer-only deployments where L1 must hold whatever was
// stored until it is cleared, and a full pool simply refuses new stores (OUT_OF_MEMORY).
// Not thread-safe: the pool serialises calls under its own mutex (eviction_policy.h).
#pragma once

#include "l1/eviction_policy.h"

namespace kvtier {

class NoopPolicy final : public EvictionPolicy {
 public:
  std::string_view Name() const override { return "noop"; }
  void OnInsert(const ObjectKey&) override { ++size_; }
  void OnAccess(const ObjectKey&) override {}
  void OnRemove(const ObjectKey&) override;
  bool ForEachCandidate(const std::function<bool(const ObjectKey&)>& visit) override;
  size_t Size() const override { return size_; }

 private:
  size_t size_ = 0;  // kept only so Size() agrees with the pool
};

}  // namespace kvtier
