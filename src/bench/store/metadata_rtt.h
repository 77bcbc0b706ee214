// `bench store`'s metadata section: the latency of the store's small calls, each next to the round
// trip of a 64-byte message over a plain socket measured in the same run (ping_pong_probe.h).
// Per call, for 1 and 32 keys per call, p50 and p99 of:
//  - exists (BatchIsExist; half of a batch's keys exist), get-size (GetSize: StoreClient has no
//    batch form, so 1 key only), put (BatchPutFrom of small values: the master's put-start, a
//    copy into the segment, put-end) and remove (BatchRemove of the keys just put);
//  - from a dummy client on node A (ConnectDummy: exists, get-size and remove go straight to the
//    master, puts through its node) and from an embedded client (StartEmbedded: its own node and
//    segment, in its process, calls the master);
//  - and, from the embedded client's process, the master's put-start and put-end alone through
//    ConnectMaster (the client every node uses), which the embedded client does not expose.
// Each client runs in a forked child (the bench process holds no client threads); the raw probes
// run once before and once after the clients, so a load change during the section shows. Calls of
// every row are interleaved (one of each per round), so a load change hits every row alike. Every
// exists and get-size answer is checked, and every put and remove must succeed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "bench/store/store_results.h"

namespace kvtier::bench {

struct MetadataPlan {
  std::string master_address;
  std::string node_address;  // node A's "host:port": the dummy client attaches to it
  uint32_t calls = 500;      // timed calls per row
  uint32_t warmup_calls = 50;
  uint32_t raw_round_trips = 2000;  // timed, per socket and probe run
  uint64_t value_bytes = 64;        // each put's values, and the raw probes' message
  uint64_t embedded_segment_bytes = 16ULL << 20;
};

MetadataSection MeasureMetadata(const MetadataPlan& plan,
                                const std::function<void(const std::string&)>& progress);

}  // namespace kvtier::bench
