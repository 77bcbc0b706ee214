// `bench store`'s yardstick from outside: a private redis-server (common/redis_yardstick.h's
// PrivateRedis: a free port, no persistence, stopped by PID) doing SET and GET of the same
// values, in pipelined batches of the same size, and (context) one command at a time: redis
// copies a big argument out of its query buffer when more of the pipeline follows it, so for
// large values it can run faster unpipelined. Same trials: one untimed warm-up (which also grows
// redis's heap to the working set), then measured trials; each trial's keys are deleted after it.
//
// The client is kvtier's own RESP connection (connectors/resp_connection.h, the `resp` L2
// connector's): SET values are sent straight from the source buffers with sendmsg and GET values
// read straight into the destination buffers, so redis gets the best client we have. Debian's
// hiredis (0.14) is used for the readiness check only: pipelining 32 x 1 MiB through
// redisAppendCommand (each value copied into its output buffer, replies read 16 KiB at a time
// and copied out of reply objects) measured 0.02 GB/s here, while redis-benchmark -P 32 did
// 0.11 GB/s against the same server in the same minute.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/store/store_results.h"

namespace kvtier::bench {

struct RedisPlan {
  uint32_t values = 0;
  uint64_t value_bytes = 0;  // a multiple of 8
  std::vector<uint32_t> batches;  // commands per pipelined batch; one section each
  uint32_t trials = 0;            // measured, after one warm-up
  uint64_t seed = 0;
};

// One section per batch size, in order; `unavailable` says why they did not run (no
// redis-server on this machine).
std::vector<TransferSection> MeasureRedis(const RedisPlan& plan);

}  // namespace kvtier::bench
