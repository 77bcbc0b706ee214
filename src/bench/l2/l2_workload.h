// The keys and values of `bench l2`, shared by every adapter config of one run. Values live in one
// prefaulted memfd (like the L1 arena the server stores from), loads land in another, so no page
// fault falls inside a timing.
#pragma once

#include <cstdint>
#include <string>

#include "bench/l2/l2_bench.h"
#include "common/memfd.h"
#include "common/status.h"
#include "connectors/connector_registry.h"

namespace kvtier::bench {

// Keys and values shared by every adapter config of one run: value i is a pure function of
// (seed, i), so a loaded value can be checked without keeping a copy.
class L2Workload {
 public:
  static Result<L2Workload> Create(const BenchL2Options& o, uint64_t value_size);

  // Phase 1 and phase 2 use different key sets, so phase 2 stores are real first writes.
  std::string Key(uint32_t phase, uint32_t index) const;
  const uint8_t* Value(uint32_t index) const { return values_.data() + Offset(index); }
  // Destination of the load of `index` in phase 2 (one per key, written once per config).
  uint8_t* LoadSlot(uint32_t index) const { return loads_.data() + Offset(index); }
  void ClearLoadSlots() const;
  // The value and load buffers, for adapters that register memory with their backend (as the
  // server's L1 arena is).
  ConnectorEnv SharedMemory() const {
    return {{{values_.data(), values_.size(), values_.fd()},
             {loads_.data(), loads_.size(), loads_.fd()}}};
  }
  // Offset of the first wrong byte of `data` as value `index`, or -1.
  int64_t Check(const uint8_t* data, uint32_t index) const;

  uint32_t keys() const { return keys_; }
  uint64_t value_size() const { return value_size_; }

 private:
  size_t Offset(uint32_t index) const { return size_t{index} * value_size_; }
  uint64_t ValueSeed(uint32_t index) const;

  std::string model_;
  uint64_t seed_ = 0;
  uint32_t keys_ = 0;
  uint64_t value_size_ = 0;
  MappedFile values_;
  MappedFile loads_;
};

}  // namespace kvtier::bench
