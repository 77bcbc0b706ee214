// Pipelined data-plane requests over a set of connections, driven by one poll() loop.
// Each stream is one connection with its ops in order: requests go out as a sliding window
// (headers and WRITE payloads gathered into one sendmsg, straight from the caller's memory) while
// replies are read as they come (READ data straight into the caller's memory). Sending and
// receiving progress independently on non-blocking sockets, so neither side's socket buffers can
// deadlock the pair however large the window. Streams may go to different peers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "store/protocol/store_errors.h"
#include "store/transport/tcp_io.h"
#include "store/transport/transfer_engine.h"

namespace kvtier::store {

inline constexpr size_t kPipelineWindowOps = 16;  // requests sent but not yet answered, per stream

struct PipelineStream {
  std::string endpoint;
  int fd = -1;
  std::vector<size_t> ops;  // indices into the batch, in the order they are sent
  bool broken = false;      // set by RunPipeline: the connection must not be reused
};

// Runs every stream's ops to completion, failure or the deadline and writes results[i] for each op
// index named in a stream. Connection errors fail the stream's unanswered ops with TRANSFER_FAIL,
// the deadline with RPC_TIMEOUT; an error reply fails only its own op.
void RunPipeline(std::span<PipelineStream> streams, std::span<const TransferOp> ops,
                 std::span<Status> results, tcp::Deadline deadline);

}  // namespace kvtier::store
