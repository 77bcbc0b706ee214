// `bench store`'s lookup-l2 section: what a cache-server LOOKUP costs when its prefetch job has to
// ask the store L2 (issue 19: "at most one socket round trip more than an L1-only LOOKUP"), next
// to a raw 64-byte loopback TCP round trip measured in the same run (ping_pong_probe.h).
// It starts two `kvtier server`s beside the bench's store: one with no L2, one with the store as
// its L2 (a dummy-mode "store" adapter on node A). The client rounds run in a forked child
// (lookup_l2_calls.h has the rows); the raw probe runs once before and once after them. Around
// the rounds the bench reads the store-L2 server's /status and /metrics and the master's
// /metrics, so the report shows that every LOOKUP of row b was an L2 lookup task that completed
// and reached the master (its exist calls), and how long those took inside the server and the
// master; a run where that cannot be shown is not verified.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "bench/store/store_results.h"

namespace kvtier::bench {

struct LookupL2Plan {
  std::string node_address;       // node A's "host:port": the store adapter's dummies attach to it
  uint16_t master_http_port = 0;  // the master's /metrics
  uint32_t calls = 1000;          // timed rounds (one LOOKUP per row each)
  uint32_t warmup_calls = 100;
  uint32_t raw_round_trips = 2000;  // timed, per probe run
};

LookupL2Section MeasureLookupL2(const LookupL2Plan& plan,
                                const std::function<void(const std::string&)>& progress);

}  // namespace kvtier::bench
