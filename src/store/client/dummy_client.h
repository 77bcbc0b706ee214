// A dummy client: a thin StoreClient inside an inference process that attaches to the node on its
// host over the node's Unix socket (@kvtier-node-<port>, docs/store.md "Dummy socket"). It owns
// no segment and no master connection. Its memory (the mem pool and the local buffer) are memfds
// handed to the node once with SCM_RIGHTS; requests then carry offsets only, and the node moves
// the bytes straight into / out of them.
// If the node restarts, the client reconnects on its next call (or heartbeat) and replays its
// registrations under the same client id; calls in between fail with RPC_FAIL.
// Thread-safety: thread-safe like every StoreClient; calls share one connection and take turns on
// it (a mutex), while a heartbeat thread pings in between.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "store/client/store_client.h"

namespace kvtier::store {

struct DummyOptions {
  std::string server_address = "127.0.0.1:50052";  // the node's "host:port"; the port names the socket
  uint64_t mem_pool_size = 0;      // memfd for AllocFromMemPool (0: none)
  uint64_t local_buffer_size = 16ull << 20;  // memfd the node stages Put/Get through
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds timeout{30000};  // per request
  // This client carries bulk transfers whose latency matters less than other clients' (e.g. the
  // store lane of the cache server's connector): the node serves it at a lower CPU priority.
  bool bulk = false;
};

Result<std::unique_ptr<StoreClient>> ConnectDummy(const DummyOptions& options);

// The abstract Unix socket name a node on `port` listens on.
std::string DummySocketName(uint16_t port);
// The port in server_address "host:port" (it names the node's socket); INVALID_PARAMS otherwise.
Result<uint16_t> DummyNodePort(const std::string& server_address);

}  // namespace kvtier::store
