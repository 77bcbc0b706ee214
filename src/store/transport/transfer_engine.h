// Moves bytes between this process's memory and segments, local or on other nodes.
// A transfer names a segment by its node's data-plane endpoint, its id and an offset (a node
// answers SEGMENT_NOT_FOUND for an id it does not serve: a stale descriptor); the local side is a
// plain pointer (already translated by the caller, e.g. into a dummy client's mapped memfd).
// Ops whose endpoint is this node's own are memcpy, a large batch's spread over a few threads
// (parallel_copy.h); the others travel over pooled TCP
// connections to the peer's DataPlaneServer, pipelined per endpoint, endpoints in parallel, and
// are read/written straight from/into the local pointer (no staging copy).
//
// Thread-safe: many callers may Run() batches at once (each takes its own connections).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/metrics.h"
#include "store/protocol/store_errors.h"
#include "store/transport/segment_gate.h"

namespace kvtier::store {

struct TransferOp {
  enum class Kind { kRead, kWrite };  // read: segment -> local; write: local -> segment
  Kind kind = Kind::kRead;
  std::string endpoint;      // the segment's node, "host:port"
  uint64_t segment_id = 0;   // the segment's id (ReplicaDesc::segment_id); refused if not served
  uint64_t offset = 0;       // in that segment
  uint8_t* local = nullptr;
  uint64_t length = 0;
  uint64_t term = 0;  // the descriptor's master term (ReplicaDesc::term); refused if superseded
};

struct TransferOptions {
  std::string local_endpoint;      // ops to this endpoint are memcpy into/out of local_segment
  uint8_t* local_segment = nullptr;
  uint64_t local_segment_size = 0;
  uint64_t local_segment_id = 0;   // local ops naming another segment fail SEGMENT_NOT_FOUND
  std::chrono::milliseconds timeout{5000};  // per batch: connect + all I/O
  size_t max_idle_connections_per_peer = 8;
  std::string auth_token;  // proved (never sent) at connection setup when not empty
  // The local segment id served now, shared with the node's data plane (segment_gate.h); null:
  // a gate of the engine's own over local_segment_id.
  std::shared_ptr<SegmentGate> local_gate;
  // Threads that copy a batch's local ops, the caller included (parallel_copy.h); 0: the host's
  // CPUs, at most 4.
  size_t copy_threads = 0;
};

class TransferEngine {
 public:
  TransferEngine(TransferOptions options, MetricsRegistry* metrics);
  ~TransferEngine();

  // One status per op, in order. A failed op never affects the others' results; a peer that is
  // down or dies mid-transfer gives TRANSFER_FAIL (or RPC_TIMEOUT) for its ops; an op naming a
  // segment its endpoint does not serve gives SEGMENT_NOT_FOUND and moves no bytes; one whose
  // term is older than the latest its node has seen gives ETCD_TRANSACTION_FAIL (counted in
  // kvtier_node_stale_term_refusals_total) and moves no bytes.
  std::vector<Status> Run(std::span<const TransferOp> ops);

  // Drops pooled connections to `endpoint` (its node went away).
  void Forget(const std::string& endpoint);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier::store
