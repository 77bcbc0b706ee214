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

// Has the kernel write every page of [data, data + size) once (it reads /dev/zero into it). On
// this VM the first time the kernel writes a user page (pread or recv into it) costs about 9 us
// per 4 KiB even when user space has written the page before (MappedFile's prefault): loads into
// such buffers ran at 0.5 GB/s, the same loads into buffers the kernel had written at 10+ GB/s.
// The server's long-lived L1 pages pay that once; the bench's buffers pay it before any timing.
Status KernelTouch(uint8_t* data, size_t size);

// `inflight` caps the concurrency a limit may use: the bench never has more tasks in flight.
// Forks redis-benchmark for `resp`: call it while this process has no other threads.
L2Limit MeasureL2Limit(const AdapterConfig& config, uint64_t value_size, uint32_t keys,
                       uint32_t inflight);

// The `resp` part (bench_l2_redis.cc).
L2Limit MeasureRedisLimit(const AdapterConfig& config, uint64_t value_size, uint32_t keys,
                          uint32_t inflight);

}  // namespace kvtier::bench
