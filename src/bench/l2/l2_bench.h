// `kvtier bench l2`: drives L2 connectors (built from `--l2-adapter` style JSON) the way the cache
// server does, and prints latencies and bandwidths next to limits measured in the same run:
//  - phase 1 ("pools"): each round submits a burst of writes (one key per task, all in flight),
//    and while they run, probes with lookups and loads of keys stored in earlier rounds; this is
//    what shows whether a store burst delays the lookups a prefetch waits on;
//  - phase 2 (throughput): stores every key with a bounded number of tasks in flight, then loads
//    every key back and verifies every byte;
//  - limits: memcpy; for `fs` raw write()/pread() of files of the same size in the same
//    directory; for `resp` redis-benchmark SET/GET of the same value size.
// Two `--adapter` configs run one after the other with the same keys and data, so their numbers
// (e.g. a shared pool against per-op lanes) can be compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::bench {

struct BenchL2Options {
  std::vector<std::string> adapters;  // adapter JSON configs, 1 or 2
  uint32_t keys = 1024;
  std::string value_size = "1MiB";  // ParseByteSize units
  uint32_t stores_per_round = 4;
  uint32_t rounds = 0;  // 0 = keys / stores_per_round (until every key is stored)
  uint32_t lookup_batch = 16;
  uint32_t inflight = 8;  // phase 2: tasks in flight, one key each
  bool warm_up = false;  // store, load and remove every key once before phase 1 (untimed)
  bool json = false;
  uint64_t seed = 1;
};

// Returns the process exit code: 0 ok, 1 failure (error or data mismatch), 2 bad options.
int RunBenchL2(const BenchL2Options& options);

}  // namespace kvtier::bench
