// What a node answers and counts when an access names a master term that is over
// (segment_gate.h, docs/store/failover.md): shared by the data-plane server and the transfer
// engine's local path, so both say the same and count in the same series.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string_view>

#include "common/metrics.h"
#include "store/protocol/store_errors.h"

namespace kvtier::store {

// kvtier_node_stale_term_refusals_total{op="read"|"write"}.
struct StaleTermCounters {
  explicit StaleTermCounters(MetricsRegistry& metrics)
      : read(metrics.GetCounter(kName, kHelp, {{"op", "read"}})),
        write(metrics.GetCounter(kName, kHelp, {{"op", "write"}})) {}
  Counter* For(bool is_write) const { return is_write ? write : read; }

  static constexpr const char* kName = "kvtier_node_stale_term_refusals_total";
  static constexpr const char* kHelp =
      "Reads and writes refused because their descriptor came from a master whose term is over";
  Counter* read;
  Counter* write;
};

// ETCD_TRANSACTION_FAIL, the code of a master's work that lost to its successor's leadership:
// the descriptor is void, and asking the master again gives one of the current term.
inline Status StaleTermRefusal(bool is_write, uint64_t term, uint64_t seen) {
  return StoreError(ErrorCode::ETCD_TRANSACTION_FAIL,
                    fmt::format("{} through a descriptor of master term {} refused: this node has "
                                "seen term {} (a newer master leads; ask it again)",
                                is_write ? "WRITE" : "READ", term, seen));
}

}  // namespace kvtier::store
