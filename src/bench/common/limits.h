// Machine limits measured in the same run as a benchmark, so its numbers can be read as a
// fraction of what this machine can do right now (the dev VM is shared and drifts).
#pragma once

#include <cstdint>

#include "common/status.h"

namespace kvtier::bench {

struct Spread {
  double median = 0;
  double min = 0;
  double max = 0;
};

struct MachineLimits {
  // Single-thread memcpy in 1 MiB chunks between two pre-touched 256 MiB buffers (DRAM).
  Spread memcpy_gbps;
  // The server's copy pattern: `gather_piece_bytes` pieces from random places of a 256 MiB
  // buffer into consecutive objects (what STORE does per block).
  Spread gather_gbps;
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

// Must run before any ZMQ context exists in this process: the echo peers are forked children.
Result<MachineLimits> MeasureMachineLimits(uint64_t gather_piece_bytes);

// Only MachineLimits::memcpy_gbps (same buffers, chunks and trials): no gather, no fork, no ZMQ,
// for benches that judge against memcpy alone.
Result<Spread> MeasureMemcpy();

}  // namespace kvtier::bench
