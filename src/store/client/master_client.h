// MasterApi over the network: msgpack requests as records on a plain TCP connection to the
// master (docs/store/master_rpc.md). Connecting is lazy and survives master restarts (a refused
// dial is retried until the call's timeout); a call that gets no answer within the timeout
// returns RPC_TIMEOUT for every key and its connection is closed, so a late reply can never be
// taken for the next call's. A master that refuses this client's secret (or its lack of one) is
// ILLEGAL_CLIENT at once, naming the cause. Thread-safe: each call checks a connection out of a
// small pool.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "store/protocol/master_api.h"

namespace kvtier::store {

struct MasterClientOptions {
  MasterClientOptions() = default;
  // NOLINTNEXTLINE(google-explicit-constructor): callers write {address, timeout}.
  MasterClientOptions(std::string a, std::chrono::milliseconds t, std::string token = "")
      : address(std::move(a)), timeout(t), auth_token(std::move(token)) {}

  std::string address = "127.0.0.1:50051";  // "host:port"
  std::chrono::milliseconds timeout{5000};
  std::string auth_token;  // the master's --auth-token-file secret; empty: none
  // Set by the owner once this master no longer leads (leader_master_client.h): calls waiting
  // for it end within 100 ms with RPC_FAIL instead of at the timeout. Null: never.
  std::shared_ptr<const std::atomic<bool>> abandoned;
};

std::unique_ptr<MasterApi> ConnectMaster(const MasterClientOptions& options);

}  // namespace kvtier::store
