// `kvtier bench master`: the store master at cluster size. A `kvtier master` child is filled with
// --objects objects (keys of --key-bytes, the length engines' chunk keys have) through the RPC
// clients nodes use, by several threads in batches of 1024, against one huge virtual segment (the
// master never touches bytes); then, for each thread count, threads send batches of --batch keys
// for --seconds: 50% get_replicas, 40% exist, 10% put (start + end) of new keys. Printed: master
// memory per object (its RSS growth over the fill), key operations per second and each batch's
// p50/p99, beside the master's ping round trip measured in the same run, and, per thread count,
// beside a raw loopback round trip at the same concurrency (raw_round_trips.h), with the CPU per
// key op of the master and of the client threads and the cores all other processes took meanwhile
// (the VM is shared: key ops/s swing with the neighbours, CPU per key op much less).
// Memory per object is printed three ways, each as its growth over the fill divided by the
// objects: the master's RSS, its allocator's bytes in use and its object table's own count (both
// from the master's /status "memory", store/master/master_memory.h).
// With --etcd the master is failover-ready (docs/store/failover.md): etcd holds its election and
// segments under a cluster id of its own that the bench deletes afterwards, and each object's
// record goes to its segment's node, here a sink in the bench process (record_sink.h); etcd's own
// transaction round trip is measured beside it. With --nodes, the node-count mode runs instead
// (node_scale.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::bench {

struct BenchMasterOptions {
  uint64_t objects = 1'000'000;
  uint32_t key_bytes = 80;
  uint32_t batch = 32;
  std::vector<uint32_t> threads = {1, 4};
  double seconds = 3;
  bool json = false;
  std::string json_out;  // also write the JSON object to this file (the table still prints)
  std::string etcd;      // HOST:PORT of an etcd the master journals to; empty: a lone master
  // The node-count mode (node_scale.h): one run per entry; empty: the mode above.
  std::vector<uint32_t> nodes;
  uint64_t object_bytes = 64 << 10;   // node mode: each object's size (the master sees only sizes)
  uint32_t replicas = 2;              // node mode: the master's --replicas
  double ping_seconds = 3;            // node mode: each CPU window
  double node_ttl_s = 10;             // node mode: the master's --node-ttl-s (its default)
  uint32_t placement_samples = 2000;  // node mode: single-key put_start calls timed
};

int RunBenchMaster(const BenchMasterOptions& options);

}  // namespace kvtier::bench
