// A store node (Mooncake's "real client"): contributes a segment of memory to the store, keeps
// its mount alive at the master (heartbeats, re-mount when the master forgets it), serves the
// data plane to other nodes, and runs puts and gets for its callers (the embedded client and the
// dummy clients served by DummyService). Callers hand plain pointers in this process.
//
// A put: PutStart at the master (which places the replicas), write every replica (memcpy into
// this node's segment, TCP to others), then PutEnd, or PutRevoke when a write failed, so no
// reader ever sees a partial object. A get: GetReplicas (grants a lease), read one replica
// (local first), then LEASE_EXPIRED if the lease ran out before the bytes arrived.
// Thread-safety: every method may be called from many threads at once (the dummy connections and
// the embedded client do); heartbeats run on a thread of the node's own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/buffer_span.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "store/client/master_client.h"
#include "store/protocol/master_api.h"
#include "store/protocol/store_errors.h"

namespace kvtier::store {

struct NodeOptions {
  std::string master = "127.0.0.1:50051";
  std::string host = "127.0.0.1";  // every listener binds here only
  uint16_t port = 50052;           // data plane; 0 picks a free port
  uint64_t segment_size = 0;       // 0: a pure client that stores nothing itself
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds rpc_timeout{5000};  // master RPCs and each transfer batch
  bool prefault = true;            // touch the segment's pages at start
  // Re-replication (repairer.h): copies of objects that lost a replica, into this segment, at
  // most this many bytes per second; 0: none.
  uint64_t repair_bytes_per_s = 256ull << 20;
  std::chrono::milliseconds repair_interval{200};
  // The store's shared secret: this node proves it to the master (RPC handshake), peers present it to
  // this node's data plane and this node to theirs. Empty: no authentication.
  std::string auth_token;
  // Threads that copy one batch's same-node bytes, the caller included (parallel_copy.h);
  // 0: the host's CPUs, at most 4; 1: the caller alone.
  size_t copy_threads = 0;
  Clock* clock = nullptr;  // what read leases are measured on; nullptr = Clock::Real()
};

class StoreNode {
 public:
  // Maps the segment, starts the data plane, mounts at the master and starts heartbeats. A master
  // that is not up yet is not an error: the heartbeat mounts once it answers. A master that
  // refuses this node's secret (or its lack of one) is: ILLEGAL_CLIENT.
  static Result<std::unique_ptr<StoreNode>> Start(const NodeOptions& options,
                                                  MetricsRegistry* metrics);
  // For tests: a node whose master is in-process. `metrics` may be null (the node keeps its own).
  static Result<std::unique_ptr<StoreNode>> Start(const NodeOptions& options,
                                                  std::unique_ptr<MasterApi> master,
                                                  MetricsRegistry* metrics);
  ~StoreNode();  // unmounts (best effort) and stops

  const NodeInfo& info() const;
  // The master's address and the secret, for clients on this host that may ask it directly for
  // metadata (dummy_connection.cc); nullopt when the master fails over or is in this process.
  std::optional<MasterClientOptions> MasterForClients() const;
  uint16_t port() const;
  bool mounted() const;  // the master has acknowledged the segment since the last NEED_REMOUNT

  std::vector<Status> Put(const std::vector<std::string>& keys, std::span<const ConstBuffer> values,
                          const PutConfig& config);
  // Bytes read per key.
  std::vector<Result<uint64_t>> Get(const std::vector<std::string>& keys,
                                    std::span<const MutableBuffer> buffers);
  std::vector<Result<uint64_t>> GetSize(const std::vector<std::string>& keys);
  std::vector<Result<bool>> Exist(const std::vector<std::string>& keys);
  // `force`: read leases do not stop the remove (master_api.h).
  std::vector<Status> Remove(const std::vector<std::string>& keys, bool force);
  Result<uint64_t> RemoveAll(bool force);
  Result<uint64_t> RemoveByRegex(const std::string& pattern, bool force);

  MetricsRegistry& metrics();

 private:
  struct Impl;
  explicit StoreNode(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store
