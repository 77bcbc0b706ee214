// What the backend of one `bench l2` adapter can do on this machine, measured in the same run
// and without kvtier in the way: for `fs`, plain write()/pread() of files of the value size in
// the adapter's directory; for `resp`, redis-benchmark SET/GET of the value size against the
// adapter's server. Other types have no backend limit (memcpy still applies).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "connectors/adapter_config.h"

namespace kvtier::bench {

struct L2Limit {
  std::string store_name;  // e.g. "raw write(), page cache" or "redis-benchmark SET"
  std::string load_name;
  double store_gbps = 0;
  double load_gbps = 0;
  nlohmann::json details = nlohmann::json::object();  // how it was measured, every number
  std::string unavailable;                            // why there is no limit; empty when measured
};

// `inflight` caps the concurrency a limit may use: the bench never has more tasks in flight.
// Forks redis-benchmark for `resp`: call it while this process has no other threads.
L2Limit MeasureL2Limit(const AdapterConfig& config, uint64_t value_size, uint32_t keys,
                       uint32_t inflight);

// The `resp` part (l2_redis_limit.cc).
L2Limit MeasureRedisLimit(const AdapterConfig& config, uint64_t value_size, uint32_t keys,
                          uint32_t inflight);

}  // namespace kvtier::bench
