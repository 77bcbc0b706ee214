// `bench store`'s yardstick from outside: a private redis-server (Debian's /usr/bin/redis-server,
// started on a free port with no persistence and stopped by PID) doing SET and GET of the same
// values, in pipelined batches of the same size through hiredis; GET copies each reply into a
// destination buffer, as the store's get lands in one. Same trials: one untimed warm-up (which
// also grows redis's heap to the working set), then measured trials; FLUSHALL between trials.
#pragma once

#include <cstdint>

#include "cli/bench_store_run.h"

namespace kvtier::cli {

struct RedisJob {
  uint32_t values = 0;
  uint64_t value_bytes = 0;  // a multiple of 8
  uint32_t batch = 0;
  uint32_t trials = 0;  // measured, after one warm-up
  uint64_t seed = 0;
};

// `unavailable` says why it did not run (no redis-server on this machine).
TransferSection MeasureRedis(const RedisJob& job);

}  // namespace kvtier::cli
