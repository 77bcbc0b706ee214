// `kvtier bench store`: the kvtier store end to end on this host, each number next to a machine
// limit measured in the same run. The bench starts a master and two nodes from this binary (node
// A with a segment, node P with none, so everything P moves crosses TCP) and forked dummy-client
// processes, and measures:
//  - same-node: a dummy on A, BatchPutFrom / BatchGetInto (zero-copy), against memcpy;
//  - cross-node: a dummy on P (every byte to or from A over the TCP data plane), against one
//    raw loopback TCP stream;
//  - redis: a private redis-server, SET/GET of the same values in pipelined batches (hiredis);
//  - master: batch Exist calls per second through ConnectMaster, from 1 and 4 threads;
//  - scaling: 1, 2 and 4 dummies on A at once, each with its own keys and its share of the
//    values (aggregate GB/s for the same total);
//  - metadata: p50/p99 per call of exists, get-size, put and remove of small values, 1 and 32
//    keys per call, from a dummy and an embedded client, against a raw 64-byte TCP (and Unix
//    socket) round trip (metadata_rtt.h);
//  - lookup-l2: a cache server's LOOKUP + WaitPrefetch with the store as its L2 (the prefetch asks
//    the store) against one without L2, next to a raw 64-byte TCP round trip (lookup_l2.h).
// Every byte read back is verified after the timed part. Each section runs one untimed warm-up
// trial first; every trial has keys of its own, a section's keys are removed when it ends, and
// segment A holds a whole section with room to spare, so nothing is ever evicted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::bench {

struct BenchStoreOptions {
  uint32_t values = 256;             // per trial (split between the scaling processes)
  std::string value_size = "1MiB";   // ParseByteSize units; a multiple of 8 bytes
  uint32_t batch = 32;               // keys per batch call (store and redis alike)
  uint32_t trials = 3;               // measured trials per section (after one warm-up)
  uint32_t exist_batch = 128;        // keys per master Exist call
  double exist_seconds = 1.0;        // per thread count
  uint32_t metadata_calls = 500;     // timed calls per metadata row (after a tenth as warm-up)
  uint32_t lookup_calls = 3000;      // timed lookup-l2 rounds (after a tenth as warm-up)
  // Which sections run, in this order: same-node (with the master's), cross-node, redis, scaling,
  // metadata, lookup-l2.
  std::vector<std::string> sections = {"same-node", "cross-node", "redis",
                                       "scaling",   "metadata",   "lookup-l2"};
  bool quick = false;                // CI smoke sizes (set by the CLI for options not given)
  bool json = false;
  std::string json_out;              // also write the JSON report to this file (when not empty)
  uint64_t seed = 1;
};

// The --quick sizes: a few seconds in all.
inline constexpr uint32_t kQuickValues = 16;
inline constexpr const char* kQuickValueSize = "256KiB";
inline constexpr uint32_t kQuickBatch = 8;
inline constexpr uint32_t kQuickTrials = 1;
inline constexpr double kQuickExistSeconds = 0.2;
inline constexpr uint32_t kQuickMetadataCalls = 100;
inline constexpr uint32_t kQuickLookupCalls = 100;

// Returns the process exit code: 0 ok, 1 failure (error or data mismatch), 2 bad options.
int RunBenchStore(const BenchStoreOptions& options);

}  // namespace kvtier::bench
