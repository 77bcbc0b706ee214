// Round trips to the cache server in a tight loop, run by the parent after the workload (all
// forks done, the server otherwise idle). Inside the workload every request follows milliseconds
// of client-side work, and on this VM a wake-up after idle costs several times a tight-loop
// one; this probe is the like-for-like partner of the raw ZMQ echo in common/limits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::bench {

struct ServerRtt {
  double ping_p50_us = 0;
  double ping_p99_us = 0;
  double lookup_p50_us = 0;  // LOOKUP of a stored prompt (hashing + job submission)
  double lookup_p99_us = 0;
  // LOOKUP and its hit count in one round trip (CacheClient::LookupAndWait), as engines look up.
  double lookup_and_wait_p50_us = 0;
  double lookup_and_wait_p99_us = 0;
  uint32_t ping_iterations = 0;
  uint32_t lookup_iterations = 0;
};

// `tokens` is a prompt the workload stored, so the lookups hit like the workload's do.
Result<ServerRtt> MeasureServerRtt(const std::string& host, uint16_t port, const std::string& model,
                                   const std::vector<uint32_t>& tokens);

}  // namespace kvtier::bench
