// Machine limits measured in the same run as a benchmark, so its numbers can be read as a
// fraction of what this machine can do right now (the dev VM is shared and drifts). Every bench
// takes its yardsticks from here:
//  - memcpy of 1 MiB chunks between two pre-touched 256 MiB buffers (DRAM), by the wall clock
//    and by this thread's CPU clock;
//  - gather, the server's copy pattern: pieces from random places of a 256 MiB buffer into
//    consecutive objects (what STORE does per block);
//  - the round trip of a raw ZMQ DEALER -> ROUTER echo over tcp loopback, between two processes;
//  - one raw loopback TCP stream (raw_tcp_probe.h), over several trials.
// The backends of `bench l2` (raw file I/O, redis-benchmark) have their limits in l2/l2_limits.h.
#pragma once

#include <cstdint>

#include "bench/common/stats.h"
#include "common/status.h"

namespace kvtier::bench {

struct MachineLimits {
  Spread memcpy_gbps;  // single thread, 1 MiB chunks, 256 MiB buffers
  Spread gather_gbps;  // `gather_piece_bytes` pieces
  uint64_t gather_piece_bytes = 0;
  // DEALER -> ROUTER echo over tcp loopback between two processes, small three-frame message.
  double zmq_rtt_p50_us = 0;
  double zmq_rtt_p99_us = 0;
  uint32_t zmq_iterations = 0;
  // The same echo, each round trip after a 1 ms sleep (context for requests that arrive at an
  // idle server, as a worker's LOOKUP does).
  double zmq_idle_rtt_p50_us = 0;
  double zmq_idle_rtt_p99_us = 0;
};

// memcpy, gather and the ZMQ echo. Must run before any ZMQ context exists in this process: the
// echo peers are forked children.
Result<MachineLimits> MeasureMachineLimits(uint64_t gather_piece_bytes);

// Only MachineLimits::memcpy_gbps (same buffers, chunks and trials): no gather, no fork, no ZMQ,
// for benches that judge against memcpy alone.
Result<Spread> MeasureMemcpy();

// The same memcpy, a few passes, in GB per CPU-second of this thread.
Result<Spread> MeasureMemcpyCpu();

struct RawTcpLimit {
  Spread gbps;
  Spread gb_per_cpu_s;  // bytes per CPU-second of the sender and receiver threads
};

// `trials` streams of `count` messages of `message_bytes` through one buffer on each side
// (MeasureRawLoopbackTcp with pool_bytes = 0); the first failure is the result.
Result<RawTcpLimit> MeasureRawTcp(uint64_t message_bytes, size_t count, int trials);

}  // namespace kvtier::bench
