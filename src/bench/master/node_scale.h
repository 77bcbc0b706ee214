// `kvtier bench master --nodes N[,N...]`: the store master against many nodes. For each N, a
// fresh `kvtier master` (--replicas, --node-ttl-s, HTTP for /metrics) and N simulated nodes
// (sim_nodes.h: each its own connection, a mounted segment it only claims, pings every 1 s and
// repair polls every 200 ms, as StoreNode's defaults) in this process. Segments are sized so the
// --objects fill (object_bytes each, `replicas` copies, written by the nodes in turn) takes 88 %
// of the space. Measured, in this order:
//  - master CPU per ping: the master's utime+stime (/proc/PID/stat) over a pings-only window,
//    divided by the pings it answered; beside it an idle window (no pings: the monitor's 100 ms
//    Tick alone) and a window with the nodes' repair polls on too;
//  - placement: p50/p99 of put_start of one object (the master choosing its nodes), one client
//    thread, pings and polls going on;
//  - eviction: a put batch that lifts use past the 95 % watermark, then /metrics polled until
//    kvtier_master_evictions_total moves (wall time includes up to one 100 ms Tick), and the
//    master's CPU over that time;
//  - re-replication planning: one node falls silent; /metrics polled every few ms: from the
//    node's expiry (kvtier_master_node_expirations_total moves) until the under-replicated gauge
//    counts every object that lost its replica there (DropMounts' scan), then, with polls on, until
//    every such object was handed to some node once (their copies are refused: these nodes have
//    no bytes);
//  - master RSS and thread count (one thread per connection).
#pragma once

#include <nlohmann/json.hpp>
#include <ostream>

#include "bench/master/master_scale.h"

namespace kvtier::bench {

int RunBenchNodes(const BenchMasterOptions& options);

// The table: one row per node count, and each measure's ratio to the first row's.
void PrintNodeScale(const nlohmann::json& report, std::ostream& os);

}  // namespace kvtier::bench
